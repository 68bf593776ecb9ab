/* Unit tests: compare pairs cells by protocol, gives ratios only between
 * equal fingerprints, names the differing fields otherwise, keeps them beside
 * a forced ratio, flags stale baselines and other engine versions, and the
 * bootstrap CI covers the true ratio. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/report.h"
#include "report_demo.h"

static const cal_cmp_row *find_row(const cal_comparison *c, cal_metric m, cal_shot_kind k, int conc)
{
    for (size_t i = 0; i < c->n_rows; i++)
        if (c->rows[i].metric == m && c->rows[i].fp.shot_kind == k &&
            (conc <= 0 || c->rows[i].fp.concurrency == conc)) return &c->rows[i];
    return NULL;
}

static int has_diff(const cal_cmp_entry *e, cal_fp_field f)
{
    for (size_t i = 0; i < e->n_diff && i < CAL_FPF__N; i++) if (e->diff[i].field == f) return 1;
    return 0;
}

static void test_matching_protocols_give_ratios(void **state)
{
    (void)state;
    cal_result *a = demo_result("A", 1.0, 1), *b = demo_result("B", 1.1, 0);
    const cal_result *rs[2] = {a, b};
    cal_compare_opts o = {0};
    o.now_unix = a->created_unix + 86400;
    cal_comparison *c = NULL;
    assert_int_equal(cal_compare(rs, 2, &o, &c), CAL_OK);
    assert_true(c->n_ratios > 10);
    assert_int_equal(c->n_refused, 0);
    const cal_cmp_row *r = find_row(c, CAL_M_REQ_TOKS, CAL_SHOT_WARM, 4);
    assert_non_null(r);
    assert_true(r->e[1].comparable);
    assert_true(fabs(r->e[1].ratio - 1.1) < 0.02);
    /* per-request samples behind both sides: a CI, and it holds 1.1 */
    assert_true(isfinite(r->e[1].ci_lo));
    assert_true(r->e[1].ci_lo < 1.1 && 1.1 < r->e[1].ci_hi);
    assert_true(r->e[1].ci_hi - r->e[1].ci_lo < 0.2);
    /* the aggregate column has no samples here: a ratio without a CI */
    r = find_row(c, CAL_M_AGG_TOKS, CAL_SHOT_WARM, 8);
    assert_non_null(r);
    assert_true(isfinite(r->e[1].ratio));
    assert_true(isnan(r->e[1].ci_lo));
    /* the row names its cell */
    assert_non_null(strstr(r->label, "aggregate tok/s"));
    assert_non_null(strstr(r->label, "c8"));
    assert_false(c->stale[0]);
    cal_comparison_free(&c);
    assert_null(c);
    cal_result_free(&a);
    cal_result_free(&b);
}

/* Must show: two runs that differ only in shot kind give no ratio and name
 * "shot kind" (cold vs warm). */
static void test_shot_kind_only_refused(void **state)
{
    (void)state;
    cal_result *a = demo_result("cold-run", 1.0, 0), *b = demo_result("warm-run", 1.0, 0);
    for (size_t i = 0; i < a->n_cells; i++) {
        a->cells[i].fp.shot_kind = CAL_SHOT_COLD;
        b->cells[i].fp.shot_kind = CAL_SHOT_WARM;
        b->cells[i].fp.shot_first = a->cells[i].fp.shot_first;
        b->cells[i].fp.shot_last = a->cells[i].fp.shot_last;
    }
    const cal_result *rs[2] = {a, b};
    cal_comparison *c = NULL;
    assert_int_equal(cal_compare(rs, 2, NULL, &c), CAL_OK);
    assert_int_equal(c->n_ratios, 0);
    assert_true(c->n_refused > 0);
    for (size_t i = 0; i < c->n_rows; i++) {
        const cal_cmp_entry *e = &c->rows[i].e[1];
        assert_true(isnan(e->ratio));
        assert_false(e->comparable);
        assert_int_equal(e->n_diff, 1);
        assert_int_equal(e->diff[0].field, CAL_FPF_SHOT_KIND);
        assert_string_equal(e->diff[0].a, "cold");
        assert_string_equal(e->diff[0].b, "warm");
        assert_non_null(strstr(e->note, "shot kind cold vs warm"));
    }
    cal_comparison_free(&c);

    /* --force: the ratio, with the difference kept beside it */
    cal_compare_opts o = {0};
    o.force = 1;
    assert_int_equal(cal_compare(rs, 2, &o, &c), CAL_OK);
    const cal_cmp_row *r = find_row(c, CAL_M_AGG_TOKS, CAL_SHOT_COLD, 4);
    assert_non_null(r);
    assert_true(fabs(r->e[1].ratio - 1.0) < 1e-9);
    assert_false(r->e[1].comparable);
    assert_true(has_diff(&r->e[1], CAL_FPF_SHOT_KIND));
    assert_int_equal(c->n_ratios, 0);   /* forced ratios are not counted as comparable */
    cal_comparison_free(&c);
    cal_result_free(&a);
    cal_result_free(&b);
}

/* Each field, changed alone in every cell of B, refuses every ratio and is
 * the one field named. */
static void test_each_field_refused(void **state)
{
    (void)state;
    for (int f = 0; f < CAL_FPF__N; f++) {
        if (f == CAL_FPF_COLUMN) continue;   /* the column belongs to the metric: below */
        if (f == CAL_FPF_SLO) continue;      /* the SLO belongs to goodput: below */
        cal_result *a = demo_result("A", 1.0, 0), *b = demo_result("B", 1.0, 0);
        for (size_t i = 0; i < b->n_cells; i++) {
            cal_fingerprint *fp = &b->cells[i].fp;
            switch ((cal_fp_field)f) {
            case CAL_FPF_SHOT_KIND:   fp->shot_kind = CAL_SHOT_RESTED; break;
            case CAL_FPF_SHOT_RANGE:  fp->shot_last += 1; break;
            case CAL_FPF_REST:        fp->rest_s = 15; break;
            case CAL_FPF_WARMUP:      fp->warmup = 2; break;
            case CAL_FPF_CONCURRENCY: fp->concurrency += 100; break;
            case CAL_FPF_RATE:        fp->request_rate = 4; break;
            case CAL_FPF_PROMPT:      fp->prompt_tokens += 1; break;
            case CAL_FPF_CONTENT:     cal_fp_set(fp->content, "code"); break;
            case CAL_FPF_OUTPUT:      cal_fp_set(fp->output_policy, "eos"); break;
            case CAL_FPF_STREAMING:   fp->streaming = 0; break;
            case CAL_FPF_API:         cal_fp_set(fp->api, "chat"); break;
            case CAL_FPF_PROBE:       cal_fp_set(fp->probe, "caliper 0.2.0"); break;
            case CAL_FPF_HOST:        cal_fp_set(fp->host, "Apple M2"); break;
            case CAL_FPF_PROTOCOL:    cal_fp_set(fp->damaged, "protocol.shots"); break;
            default: break;
            }
        }
        const cal_result *rs[2] = {a, b};
        cal_comparison *c = NULL;
        assert_int_equal(cal_compare(rs, 2, NULL, &c), CAL_OK);
        assert_int_equal(c->n_ratios, 0);
        size_t named = 0;
        for (size_t i = 0; i < c->n_rows; i++) {
            const cal_cmp_entry *e = &c->rows[i].e[1];
            if (!e->present) continue;
            assert_true(isnan(e->ratio));
            assert_int_equal(e->n_diff, 1);
            assert_int_equal(e->diff[0].field, f);
            assert_non_null(strstr(e->note, cal_fp_field_name((cal_fp_field)f)));
            named++;
        }
        assert_true(named > 0);
        cal_comparison_free(&c);
        cal_result_free(&a);
        cal_result_free(&b);
    }
}

/* Goodput under two different SLOs is never divided, and the SLO is named;
 * every other metric of the same cells still pairs (the SLO changes
 * goodput alone). The same SLO on both sides divides goodput too. */
static void test_slo_refuses_goodput_only(void **state)
{
    (void)state;
    for (int same = 0; same <= 1; same++) {
        cal_result *a = demo_result("A", 1.0, 0), *b = demo_result("B", 1.2, 0);
        for (size_t i = 0; i < a->n_cells; i++) {
            cal_fp_set(a->cells[i].fp.slo, "ttft=500ms");
            a->cells[i].v[CAL_M_GOODPUT] = 2.0;
        }
        for (size_t i = 0; i < b->n_cells; i++) {
            cal_fp_set(b->cells[i].fp.slo, same ? "ttft=500ms" : "ttft=200ms");
            b->cells[i].v[CAL_M_GOODPUT] = 3.0;
        }
        const cal_result *rs[2] = {a, b};
        cal_comparison *c = NULL;
        assert_int_equal(cal_compare(rs, 2, NULL, &c), CAL_OK);
        size_t goodput_rows = 0, other_ratios = 0;
        for (size_t i = 0; i < c->n_rows; i++) {
            const cal_cmp_entry *e = &c->rows[i].e[1];
            if (!e->present) continue;
            if (c->rows[i].metric == CAL_M_GOODPUT) {
                goodput_rows++;
                if (same) {
                    assert_true(e->comparable);
                    assert_true(fabs(e->ratio - 1.5) < 1e-9);
                } else {
                    assert_false(e->comparable);
                    assert_true(isnan(e->ratio));
                    assert_int_equal(e->n_diff, 1);
                    assert_int_equal(e->diff[0].field, CAL_FPF_SLO);
                    assert_non_null(strstr(e->note, "SLO ttft=500ms vs ttft=200ms"));
                }
            } else if (e->comparable && isfinite(e->ratio)) {
                other_ratios++;
            }
        }
        assert_true(goodput_rows > 0);
        assert_true(other_ratios > 0);
        cal_comparison_free(&c);
        cal_result_free(&a);
        cal_result_free(&b);
    }
}

/* The column: an aggregate number never pairs with a per-request one. */
static void test_column_differs(void **state)
{
    (void)state;
    cal_fingerprint a, b;
    cal_fp_init(&a);
    b = a;
    a.column = CAL_COL_AGGREGATE;
    b.column = CAL_COL_PER_REQUEST;
    cal_fp_difference d[CAL_FPF__N];
    assert_int_equal(cal_fp_diff(&a, &b, d, CAL_FPF__N), 1);
    assert_string_equal(cal_fp_field_name(d[0].field), "column");
    assert_int_equal(cal_metric_get(CAL_M_AGG_TOKS)->column, CAL_COL_AGGREGATE);
    assert_int_equal(cal_metric_get(CAL_M_REQ_TOKS)->column, CAL_COL_PER_REQUEST);
}

/* Baseline has cold 1 and warm 2–6; B only warm: the warm rows pair, the
 * cold row says B has no cold shots. */
static void test_missing_cold_shots(void **state)
{
    (void)state;
    cal_result *a = demo_result("A", 1.0, 0), *b = demo_result("B", 1.05, 0);
    /* drop B's cold cell (the first) */
    cal_rcell cold = b->cells[0];
    memmove(&b->cells[0], &b->cells[1], (b->n_cells - 1) * sizeof b->cells[0]);
    b->n_cells--;
    const cal_result *rs[2] = {a, b};
    cal_comparison *c = NULL;
    assert_int_equal(cal_compare(rs, 2, NULL, &c), CAL_OK);
    const cal_cmp_row *r = find_row(c, CAL_M_PREFILL_TOKS, CAL_SHOT_COLD, 1);
    assert_non_null(r);
    assert_false(r->e[1].present);
    assert_non_null(strstr(r->e[1].note, "has no cold shots"));
    r = find_row(c, CAL_M_PREFILL_TOKS, CAL_SHOT_WARM, 1);
    assert_non_null(r);
    assert_true(r->e[1].comparable);
    assert_true(fabs(r->e[1].ratio - 1.05) < 0.01);
    cal_comparison_free(&c);
    for (int s = 0; s < CAL_S__N; s++) free(cold.s[s]);
    cal_result_free(&a);
    cal_result_free(&b);
}

/* B's matching cell measured no decode speed (every stream in one chunk):
 * the row says so, and does not call the cell missing or refuse it for
 * another field. */
static void test_unmeasured_metric_in_matching_cell(void **state)
{
    (void)state;
    cal_result *a = demo_result("A", 1.0, 0), *b = demo_result("B", 1.05, 0);
    assert_int_equal(b->cells[0].fp.shot_kind, CAL_SHOT_COLD);
    b->cells[0].v[CAL_M_DECODE_TOKS] = NAN;
    const cal_result *rs[2] = {a, b};
    cal_comparison *c = NULL;
    assert_int_equal(cal_compare(rs, 2, NULL, &c), CAL_OK);
    const cal_cmp_row *r = find_row(c, CAL_M_DECODE_TOKS, CAL_SHOT_COLD, 1);
    assert_non_null(r);
    assert_false(r->e[1].present);
    assert_string_equal(r->e[1].note, "not measured: B's matching cell has no decode tok/s");
    assert_int_equal(c->n_refused, 0);
    /* the same metric in the warm cell still pairs */
    r = find_row(c, CAL_M_DECODE_TOKS, CAL_SHOT_WARM, 1);
    assert_non_null(r);
    assert_true(r->e[1].comparable);
    cal_comparison_free(&c);
    cal_result_free(&a);
    cal_result_free(&b);
}

static void test_stale_and_version(void **state)
{
    (void)state;
    cal_result *a = demo_result("old", 1.0, 0), *b = demo_result("new", 1.0, 0);
    b->created_unix = a->created_unix + 45 * 86400;
    snprintf(b->target_version, sizeof b->target_version, "0.2.0");
    const cal_result *rs[2] = {a, b};
    cal_compare_opts o = {0};
    o.stale_s = 30 * 86400;
    o.now_unix = b->created_unix;
    cal_comparison *c = NULL;
    assert_int_equal(cal_compare(rs, 2, &o, &c), CAL_OK);
    assert_true(c->stale[0]);
    assert_false(c->stale[1]);
    assert_true(fabs(c->age_days[0] - 45) < 0.01);
    assert_non_null(strstr(c->flags[0], "45 d ago"));
    assert_non_null(strstr(c->flags[1], "engine version 0.2.0"));
    cal_comparison_free(&c);
    o.stale_s = 0;   /* never */
    assert_int_equal(cal_compare(rs, 2, &o, &c), CAL_OK);
    assert_false(c->stale[0]);
    cal_comparison_free(&c);
    /* n out of range */
    assert_int_equal(cal_compare(rs, 1, &o, &c), CAL_EINVAL);
    cal_result_free(&a);
    cal_result_free(&b);
}

static void test_ratio_ci(void **state)
{
    (void)state;
    double a[40], b[40];
    for (int i = 0; i < 40; i++) a[i] = 100 + (i % 7) - 3;
    for (int i = 0; i < 40; i++) b[i] = 2 * a[(i * 13) % 40];
    double lo, hi;
    assert_int_equal(cal_ratio_ci(a, 40, b, 40, 50, 500, 7, &lo, &hi), CAL_OK);
    assert_true(lo <= 2.0 && 2.0 <= hi);
    assert_true(lo > 1.9 && hi < 2.1);
    /* same seed, same answer */
    double lo2, hi2;
    assert_int_equal(cal_ratio_ci(a, 40, b, 40, 50, 500, 7, &lo2, &hi2), CAL_OK);
    assert_true(lo == lo2 && hi == hi2);
    assert_int_equal(cal_ratio_ci(a, 1, b, 40, 50, 500, 7, &lo, &hi), CAL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matching_protocols_give_ratios),
        cmocka_unit_test(test_shot_kind_only_refused),
        cmocka_unit_test(test_each_field_refused),
        cmocka_unit_test(test_column_differs),
        cmocka_unit_test(test_slo_refuses_goodput_only),
        cmocka_unit_test(test_missing_cold_shots),
        cmocka_unit_test(test_unmeasured_metric_in_matching_cell),
        cmocka_unit_test(test_stale_and_version),
        cmocka_unit_test(test_ratio_ci),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
