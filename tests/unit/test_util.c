/* Unit tests: the unit table, the capped buffer, descriptive statistics. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "caliper/stats.h"
#include "caliper/units.h"

static double parse_ok(cal_unit u, const char *s, const char *bare)
{
    double v = -1;
    assert_int_equal(cal_unit_parse(u, s, bare, &v), CAL_OK);
    return v;
}

static void test_units_parse(void **state)
{
    (void)state;
    assert_true(fabs(parse_ok(CAL_U_TIME, "250ms", NULL) - 0.25) < 1e-12);
    assert_true(fabs(parse_ok(CAL_U_TIME, "6.084s", NULL) - 6.084) < 1e-12);
    assert_true(fabs(parse_ok(CAL_U_TIME, "2m", NULL) - 120) < 1e-12);
    assert_true(fabs(parse_ok(CAL_U_TIME, "30d", NULL) - 30 * 86400.0) < 1e-6);
    assert_true(fabs(parse_ok(CAL_U_TIME, "17.6", "ms") - 0.0176) < 1e-12);
    assert_true(fabs(parse_ok(CAL_U_BYTES, "2.7GB", NULL) - 2.7e9) < 1);
    assert_true(fabs(parse_ok(CAL_U_BYTES, "39.4KB", NULL) - 39400) < 1e-6);
    assert_true(fabs(parse_ok(CAL_U_BYTES, "1GiB", NULL) - 1073741824.0) < 1e-6);
    assert_true(fabs(parse_ok(CAL_U_BANDWIDTH, "1133GB/s", NULL) - 1.133e12) < 1);
    assert_true(fabs(parse_ok(CAL_U_POWER, "60W", NULL) - 60) < 1e-12);
    assert_true(fabs(parse_ok(CAL_U_FREQ, "1296MHz", NULL) - 1.296e9) < 1e-3);
    assert_true(fabs(parse_ok(CAL_U_COUNT, "1M", NULL) - 1e6) < 1e-9);
    assert_true(fabs(parse_ok(CAL_U_COUNT, "2k", NULL) - 2000) < 1e-9);
    assert_true(fabs(parse_ok(CAL_U_RATIO, "5.5%", NULL) - 0.055) < 1e-12);
    assert_true(fabs(parse_ok(CAL_U_RATIO, "1.42x", NULL) - 1.42) < 1e-12);
    assert_true(fabs(parse_ok(CAL_U_ENERGY, "1Wh", NULL) - 3600) < 1e-9);
}

static void test_units_reject(void **state)
{
    (void)state;
    double v = 0;
    assert_int_equal(cal_unit_parse(CAL_U_TIME, "", NULL, &v), CAL_EINVAL);
    assert_int_equal(cal_unit_parse(CAL_U_TIME, "fast", NULL, &v), CAL_EINVAL);
    assert_int_equal(cal_unit_parse(CAL_U_TIME, "10", NULL, &v), CAL_EINVAL);  /* unit required */
    assert_int_equal(cal_unit_parse(CAL_U_TIME, "10GB", NULL, &v), CAL_EINVAL);
    assert_int_equal(cal_unit_parse(CAL_U_TIME, "inf", NULL, &v), CAL_EINVAL);
    assert_int_equal(cal_unit_parse(CAL_U_TIME, "nan s", NULL, &v), CAL_EINVAL);
    assert_int_equal(cal_unit_parse(CAL_U_BYTES, "0x10B", NULL, &v), CAL_EINVAL);
    assert_int_equal(cal_unit_parse(CAL_U_BANDWIDTH, "10GB", NULL, &v), CAL_EINVAL);
    assert_int_equal(cal_unit_parse(CAL_U_COUNT, "1e999", NULL, &v), CAL_EINVAL);
}

static void test_units_roundtrip(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(cal_unit_format(CAL_U_TIME, 0.25, 3, b, sizeof b), "250 ms");
    assert_string_equal(cal_unit_format(CAL_U_BYTES, 2.7e9, 3, b, sizeof b), "2.70 GB");
    assert_string_equal(cal_unit_format(CAL_U_BANDWIDTH, 1.133e12, 4, b, sizeof b), "1.133 TB/s");
    assert_string_equal(cal_unit_format(CAL_U_POWER, 41, 3, b, sizeof b), "41.0 W");
    /* what is printed parses back to the same value at that precision */
    double v;
    cal_unit_format(CAL_U_TIME, 0.0123456, 4, b, sizeof b);
    assert_int_equal(cal_unit_parse(CAL_U_TIME, b, NULL, &v), CAL_OK);
    assert_true(fabs(v - 0.01235) < 1e-9);
}

static void test_buf_cap(void **state)
{
    (void)state;
    cal_buf b = CAL_BUF_INIT(8);
    assert_int_equal(cal_buf_puts(&b, "abcd"), CAL_OK);
    assert_int_equal(cal_buf_puts(&b, "efgh"), CAL_OK);
    assert_int_equal(cal_buf_puts(&b, "i"), CAL_ETOOBIG);
    assert_int_equal(b.len, 8);                      /* unchanged by the failure */
    assert_string_equal(b.data, "abcdefgh");
    cal_buf_consume(&b, 3);
    assert_string_equal(b.data, "defgh");
    assert_int_equal(cal_buf_printf(&b, "%d", 123), CAL_OK);
    assert_string_equal(b.data, "defgh123");
    assert_int_equal(cal_buf_printf(&b, "%d", 4), CAL_ETOOBIG);
    cal_buf_free(&b);
    assert_null(b.data);
}

static void test_stats(void **state)
{
    (void)state;
    double x[] = {5, 1, 4, 2, 3};
    assert_true(fabs(cal_stats_median(x, 5) - 3) < 1e-12);
    assert_true(fabs(cal_stats_percentile_sorted(x, 5, 90) - 4.6) < 1e-12);
    assert_true(fabs(cal_stats_percentile_sorted(x, 5, 25) - 2) < 1e-12);
    double y[] = {1, 2};
    assert_true(fabs(cal_stats_median(y, 2) - 1.5) < 1e-12);
    assert_true(isnan(cal_stats_median(y, 0)));
    double z[] = {2, 4, 4, 4, 5, 5, 7, 9};
    assert_true(fabs(cal_stats_mean(z, 8) - 5) < 1e-12);
    assert_true(fabs(cal_stats_sd(z, 8) - 2.138089935) < 1e-6);
    assert_true(isnan(cal_stats_sd(z, 1)));
    assert_string_equal(cal_strerror(CAL_ETOOBIG), "size limit exceeded");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_parse),
        cmocka_unit_test(test_units_reject),
        cmocka_unit_test(test_units_roundtrip),
        cmocka_unit_test(test_buf_cap),
        cmocka_unit_test(test_stats),
    };
    return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
