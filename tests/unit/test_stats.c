/* Unit tests: Student's t against printed table values and an independent
 * numerical integration, t tests and the least squares line against values
 * computed separately, the seeded bootstrap's determinism and bounds. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/stats.h"

#define NEAR(got, want, tol) assert_true(fabs((got) - (want)) <= (tol))

static void test_t_quantile_table(void **state)
{
    (void)state;
    /* two-sided 95 % and 99 % critical values from printed t tables */
    static const struct { double df, q975, q995; } T[] = {
        {1, 12.706, 63.657}, {2, 4.303, 9.925}, {3, 3.182, 5.841}, {5, 2.571, 4.032},
        {10, 2.228, 3.169}, {20, 2.086, 2.845}, {30, 2.042, 2.750}, {120, 1.980, 2.617}};
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        NEAR(cal_stats_t_quantile(0.975, T[i].df), T[i].q975, 0.0005);
        NEAR(cal_stats_t_quantile(0.995, T[i].df), T[i].q995, 0.0005);
        NEAR(cal_stats_t_quantile(0.025, T[i].df), -T[i].q975, 0.0005);
    }
    NEAR(cal_stats_t_quantile(0.975, 7), 2.364624251592785, 1e-9);
    NEAR(cal_stats_t_quantile(0.975, 1e7), 1.959963985, 1e-6);     /* → normal */
    NEAR(cal_stats_t_quantile(0.5, 4), 0, 0);
    assert_true(isnan(cal_stats_t_quantile(1, 4)));
    assert_true(isnan(cal_stats_t_quantile(0.9, 0)));
}

static void test_t_cdf(void **state)
{
    (void)state;
    NEAR(cal_stats_t_cdf(2.0, 7), 0.957190, 1e-6);
    NEAR(cal_stats_t_cdf(2.015048, 5), 0.95, 1e-6);
    NEAR(cal_stats_t_cdf(-1.812461, 10), 0.05, 1e-6);
    /* fractional df, against Simpson integration of the density */
    NEAR(cal_stats_t_cdf(2.5, 3.5), 0.9621526780952518, 1e-9);
    NEAR(cal_stats_t_cdf(0, 3), 0.5, 1e-15);
    for (double p = 0.01; p < 1; p += 0.07)           /* quantile inverts the CDF */
        NEAR(cal_stats_t_cdf(cal_stats_t_quantile(p, 4.3), 4.3), p, 1e-10);
    NEAR(cal_stats_ibeta(2, 3, 0.4), 0.5248, 1e-12);   /* closed form 1−(1−x)^3(1+3x) */
    assert_true(isnan(cal_stats_ibeta(-1, 1, 0.5)));
}

static void test_paired_and_one(void **state)
{
    (void)state;
    double a[] = {7.5, 8.0, 9.0, 6.5, 8.5, 9.5, 7.0, 8.0};
    double b[] = {8.0, 8.0, 8.5, 7.5, 9.0, 9.5, 7.5, 8.5};
    double scratch[8];
    cal_ttest t;
    assert_int_equal(cal_stats_t_paired(a, b, 8, 0.95, scratch, &t), CAL_OK);
    NEAR(t.mean, 0.3125, 1e-12);
    NEAR(t.sd, 0.45806269065645216, 1e-12);
    NEAR(t.t, 1.9296124624698994, 1e-10);
    NEAR(t.half, 0.38294999280679254, 1e-9);
    NEAR(t.df, 7, 0);
    assert_true(t.lo < 0 && t.hi > 0);                 /* "no detectable change" */
    assert_true(t.p > 0.05 && t.p < 0.1);
    /* the t formula itself: mean ÷ (sd ÷ √n) */
    NEAR(t.t, t.mean / (t.sd / sqrt(8)), 1e-12);
    /* identical answers scored identically: zero spread, zero mean → t = 0 */
    double z[5] = {0, 0, 0, 0, 0};
    assert_int_equal(cal_stats_t_one(z, 5, 0.95, &t), CAL_OK);
    NEAR(t.t, 0, 0);
    NEAR(t.p, 1, 0);
    double c[4] = {0.5, 0.5, 0.5, 0.5};
    assert_int_equal(cal_stats_t_one(c, 4, 0.95, &t), CAL_ERANGE);
    assert_int_equal(cal_stats_t_one(c, 1, 0.95, &t), CAL_EINVAL);
    assert_int_equal(cal_stats_t_one(c, 4, 1.0, &t), CAL_EINVAL);
}

static void test_welch(void **state)
{
    (void)state;
    double x[] = {10.1, 9.8, 10.4, 10.0, 9.9}, y[] = {10.9, 11.4, 10.6, 11.8, 11.1, 10.7};
    cal_ttest t;
    assert_int_equal(cal_stats_t_welch(x, 5, y, 6, 0.95, &t), CAL_OK);
    NEAR(t.mean, 1.043333333333333, 1e-12);
    NEAR(t.t, 4.925013337579949, 1e-9);
    NEAR(t.df, 7.655429395196746, 1e-9);
    NEAR(t.p, 0.0013150180610210782, 1e-8);
    assert_true(t.lo > 0);
    NEAR(t.hi - t.mean, t.mean - t.lo, 1e-12);
    assert_int_equal(cal_stats_t_welch(x, 1, y, 6, 0.95, &t), CAL_EINVAL);
}

static void test_linfit(void **state)
{
    (void)state;
    double x[] = {512, 1024, 2048, 4096}, y[] = {0.61, 1.2, 2.3, 4.6};
    cal_linfit f;
    assert_int_equal(cal_stats_linfit(x, y, 4, 0.95, &f), CAL_OK);
    NEAR(f.a, 0.0452173913043481, 1e-12);
    NEAR(f.b, 0.0011105638586956519, 1e-15);
    NEAR(f.se_b, 7.027228554883567e-06, 1e-15);
    NEAR(f.se_a, 0.016585688594766612, 1e-12);
    NEAR(f.r2, 0.9999199288058577, 1e-12);
    NEAR(f.b_hi - f.b, 4.302652729749464 * f.se_b, 1e-12);
    assert_true(f.has_ci);
    double h;
    double at = cal_stats_linfit_at(&f, f.xbar, &h);
    NEAR(at, f.a + f.b * f.xbar, 1e-12);
    NEAR(h, f.t_crit * f.s / 2, 1e-12);                 /* at x̄: t·s·√(1/n) */
    /* an exact line: zero residual, CIs collapse onto the values */
    double ye[] = {1, 2, 3, 4}, xe[] = {0, 1, 2, 3};
    assert_int_equal(cal_stats_linfit(xe, ye, 4, 0.95, &f), CAL_OK);
    NEAR(f.a, 1, 1e-12);
    NEAR(f.b, 1, 1e-12);
    NEAR(f.b_hi - f.b_lo, 0, 1e-9);
    /* two points: a line, no CI */
    assert_int_equal(cal_stats_linfit(xe, ye, 2, 0.95, &f), CAL_OK);
    assert_false(f.has_ci);
    NEAR(f.b, 1, 1e-12);
    /* all x equal: no slope */
    double xs[] = {5, 5, 5};
    assert_int_equal(cal_stats_linfit(xs, ye, 3, 0.95, &f), CAL_ERANGE);
    assert_int_equal(cal_stats_linfit(xe, ye, 1, 0.95, &f), CAL_EINVAL);
    double yn[] = {1, NAN, 3};
    assert_int_equal(cal_stats_linfit(xe, yn, 3, 0.95, &f), CAL_EINVAL);
}

static void test_bootstrap(void **state)
{
    (void)state;
    double x[41], scratch[41 + 500];
    for (int i = 0; i < 41; i++) x[i] = 100 + ((i * 37) % 41) * 0.5;  /* 100 … 120 */
    double m1, lo1, hi1, m2, lo2, hi2;
    assert_int_equal(cal_stats_median_ci(x, 41, 0.95, 500, 42, scratch, 541, &m1, &lo1, &hi1),
                     CAL_OK);
    NEAR(m1, 110, 1e-12);
    assert_true(lo1 <= m1 && m1 <= hi1);
    assert_true(lo1 >= 100 && hi1 <= 120);
    assert_true(hi1 - lo1 > 0);
    assert_int_equal(cal_stats_median_ci(x, 41, 0.95, 500, 42, scratch, 541, &m2, &lo2, &hi2),
                     CAL_OK);
    assert_true(lo1 == lo2 && hi1 == hi2);              /* same seed, same CI */
    NEAR(x[0], 100, 0);                                 /* input untouched */
    assert_int_equal(cal_stats_median_ci(x, 41, 0.95, 500, 42, scratch, 540, &m2, &lo2, &hi2),
                     CAL_ETOOBIG);
    assert_int_equal(cal_stats_median_ci(x, 0, 0.95, 500, 42, scratch, 541, &m2, &lo2, &hi2),
                     CAL_EINVAL);
    double one = 3, s1[11];
    assert_int_equal(cal_stats_median_ci(&one, 1, 0.9, 10, 1, s1, 11, &m2, &lo2, &hi2), CAL_OK);
    assert_true(m2 == 3 && lo2 == 3 && hi2 == 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_t_quantile_table), cmocka_unit_test(test_t_cdf),
        cmocka_unit_test(test_paired_and_one),   cmocka_unit_test(test_welch),
        cmocka_unit_test(test_linfit),           cmocka_unit_test(test_bootstrap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
