/* Unit tests: the unit table, the capped buffer, descriptive statistics,
 * and the command line's number parsers (range checked before any
 * conversion, so a huge value is a usage error, never undefined). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <limits.h>
#include <cmocka.h>
#include "src/cli.h"
#include "caliper/buf.h"
#include "caliper/clock.h"
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

static void test_cli_parse_long(void **state)
{
    (void)state;
    long v = -7;
    assert_int_equal(cli_parse_long("t", "--n", "2k", 1, 1000000, &v), CLI_OK);
    assert_int_equal(v, 2000);
    assert_int_equal(cli_parse_long("t", "--n", "-5", -10, 10, &v), CLI_OK);
    assert_int_equal(v, -5);
    v = -7;
    /* each is a usage error and leaves *out alone: 1e30 and 2^63 used to
     * be converted to long before the range check (undefined behaviour) */
    static const char *bad[] = {"1e30", "-1e30", "9223372036854775808", "1e19", "1.5", "x",
                                "", "1000001", "0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(cli_parse_long("t", "--n", bad[i], 1, 1000000, &v), CLI_USAGE);
    assert_int_equal(cli_parse_long("t", "--seed", "1e30", 0, LONG_MAX, &v), CLI_USAGE);
    assert_int_equal(cli_parse_long("t", "--seed", "9.3e18", 0, LONG_MAX, &v), CLI_USAGE);
    assert_int_equal(cli_parse_long("t", "--n", "-1e300", LONG_MIN, LONG_MAX, &v), CLI_USAGE);
    assert_int_equal(v, -7);
    assert_int_equal(cli_parse_long("t", "--seed", "9e18", 0, LONG_MAX, &v), CLI_OK);
    assert_int_equal(v, 9000000000000000000L);
    long list[4];
    size_t n = 0;
    assert_int_equal(cli_parse_long_list("t", "--c", "1,1e30", 1, 100, list, 4, &n), CLI_USAGE);
    /* an empty value is a typo, not nothing: "1,,2" once ran as "1,2" */
    static const char *holes[] = {"1,,2", ",1", "1,", ","};
    for (size_t i = 0; i < sizeof holes / sizeof *holes; i++)
        assert_int_equal(cli_parse_long_list("t", "--c", holes[i], 1, 100, list, 4, &n), CLI_USAGE);
    assert_int_equal(cli_parse_long_list("t", "--c", "1,2", 1, 100, list, 4, &n), CLI_OK);
    assert_int_equal(n, 2);
}

static void test_cli_parse_ranges(void **state)
{
    (void)state;
    double v = -7;
    /* times: never past CLI_TIME_MAX_S, whose nanoseconds fit in int64 */
    assert_int_equal(cli_parse_time_in("t", "--d", "1e10s", "s", 0, 0, &v), CLI_USAGE);
    assert_int_equal(cli_parse_time_in("t", "--d", "367d", "s", 0, 0, &v), CLI_USAGE);
    assert_int_equal(cli_parse_time_in("t", "--d", "0", "s", 0, 0, &v), CLI_USAGE);
    assert_int_equal(cli_parse_time_in("t", "--d", "5ms", "s", 0.01, 60, &v), CLI_USAGE);
    assert_int_equal(cli_parse_time_in("t", "--d", "61", "s", 0.01, 60, &v), CLI_USAGE);
    assert_true(v == -7);
    assert_int_equal(cli_parse_time_in("t", "--d", "366d", "s", 0, 0, &v), CLI_OK);
    assert_true(v == CLI_TIME_MAX_S);
    assert_true(CLI_TIME_MAX_S * 1e9 * 2 < (double)INT64_MAX);
    assert_int_equal(cli_parse_time_in("t", "--d", "250", "ms", 0.01, 60, &v), CLI_OK);
    assert_true(v == 0.25);
    /* quantities: closed and open lower bounds */
    assert_int_equal(cli_parse_unit_in("t", "--r", "0", CAL_U_TIME, "s", 0, 10, 0, &v), CLI_OK);
    assert_true(v == 0);
    assert_int_equal(cli_parse_unit_in("t", "--r", "0", CAL_U_COUNT, NULL, 0, 10, 1, &v),
                     CLI_USAGE);
    assert_int_equal(cli_parse_unit_in("t", "--r", "-1", CAL_U_TIME, "s", 0, 10, 0, &v),
                     CLI_USAGE);
    assert_int_equal(cli_parse_unit_in("t", "--r", "1e300", CAL_U_COUNT, NULL, 0, 10, 1, &v),
                     CLI_USAGE);
    assert_true(v == 0);
}

/* Every span that becomes int64 nanoseconds goes through one clamp: NaN
 * and negative spans are 0, huge ones the year-and-a-day bound, never a
 * wrapped or undefined conversion. */
static void test_span_ns(void **state)
{
    (void)state;
    assert_true(cal_span_ns(1.5) == 1500000000LL);
    assert_true(cal_span_ns(0) == 0);
    assert_true(cal_span_ns(-3) == 0);
    assert_true(cal_span_ns(NAN) == 0);
    assert_true(cal_span_ns(-INFINITY) == 0);
    int64_t max = (int64_t)(CAL_SPAN_MAX_S * 1e9);
    assert_true(cal_span_ns(1e12) == max);       /* what --rate 1e-12 once asked for */
    assert_true(cal_span_ns(1e300) == max);
    assert_true(cal_span_ns(INFINITY) == max);
    assert_true(max > 0 && (double)max < (double)INT64_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_parse),
        cmocka_unit_test(test_units_reject),
        cmocka_unit_test(test_units_roundtrip),
        cmocka_unit_test(test_buf_cap),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_cli_parse_long),
        cmocka_unit_test(test_cli_parse_ranges),
        cmocka_unit_test(test_span_ns),
    };
    return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
