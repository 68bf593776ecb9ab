/* Unit tests: CSV columns for caliper fit (header or positional, separators,
 * units, comments, every error named), least squares with the duplicate-x
 * check, and the prefill before/after verdict on data built to show each. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/fit.h"

#define NEAR(got, want, tol) assert_true(fabs((got) - (want)) <= (tol))

static int csv2(const char *text, const char *xn, const char *yn, cal_unit yu,
                const char *ybare, double *x, double *y, size_t cap, size_t *n, char *why)
{
    cal_csv_col c[2] = {{xn, CAL_U_COUNT, NULL, x}, {yn, yu, ybare, y}};
    return cal_csv_columns(text, strlen(text), c, 2, cap, n, why, 256);
}

static void test_csv_ok(void **state)
{
    (void)state;
    double x[8], y[8];
    size_t n;
    char why[256];
    /* header, comment, blank line, CRLF, extra columns, units in cells */
    const char *t = "# prompt sweep\nshot,n,seconds\r\n1,512,0.6\r\n\n2,1k,1.12s\n3,2048,2150ms\n";
    assert_int_equal(csv2(t, "n", "seconds", CAL_U_TIME, "s", x, y, 8, &n, why), CAL_OK);
    assert_int_equal(n, 3);
    NEAR(x[1], 1000, 0);
    NEAR(y[0], 0.6, 1e-15);
    NEAR(y[1], 1.12, 1e-15);
    NEAR(y[2], 2.15, 1e-15);
    /* bare numbers meaning ms; tabs; semicolons */
    assert_int_equal(csv2("n\tms\n100\t20\n200\t25\n", "n", "ms", CAL_U_TIME, "ms", x, y, 8, &n,
                          why), CAL_OK);
    NEAR(y[1], 0.025, 1e-15);
    assert_int_equal(csv2("n;b\n1;2GB\n", "n", "b", CAL_U_BYTES, "B", x, y, 8, &n, why), CAL_OK);
    NEAR(y[0], 2e9, 0);
    /* no header: whitespace separated, columns by position */
    assert_int_equal(csv2("  10   1.5\n20 2.5\n", "1", "2", CAL_U_RATIO, NULL, x, y, 8, &n, why),
                     CAL_OK);
    assert_int_equal(n, 2);
    NEAR(y[1], 2.5, 0);
    /* position works beside a header too */
    assert_int_equal(csv2("a,b\n1,2\n", "1", "2", CAL_U_RATIO, NULL, x, y, 8, &n, why), CAL_OK);
    /* empty input: zero rows */
    assert_int_equal(csv2("", "1", "2", CAL_U_RATIO, NULL, x, y, 8, &n, why), CAL_OK);
    assert_int_equal(n, 0);
}

static void test_csv_errors(void **state)
{
    (void)state;
    double x[4], y[4];
    size_t n;
    char why[256];
    assert_int_equal(csv2("n,secs\n1,2\n", "n", "seconds", CAL_U_TIME, "s", x, y, 4, &n, why),
                     CAL_ENOTFOUND);
    assert_non_null(strstr(why, "\"seconds\""));
    assert_non_null(strstr(why, "n,secs"));           /* lists the header it saw */
    assert_int_equal(csv2("n,seconds\n1,fast\n", "n", "seconds", CAL_U_TIME, "s", x, y, 4, &n,
                          why), CAL_EPROTO);
    assert_non_null(strstr(why, "line 2"));
    assert_non_null(strstr(why, "fast"));
    assert_int_equal(csv2("n,seconds\n1,2GB\n", "n", "seconds", CAL_U_TIME, "s", x, y, 4, &n,
                          why), CAL_EPROTO);
    assert_int_equal(csv2("n,seconds\n1\n", "n", "seconds", CAL_U_TIME, "s", x, y, 4, &n, why),
                     CAL_EPROTO);
    assert_non_null(strstr(why, "fields"));
    assert_int_equal(csv2("n,seconds\n1,\n", "n", "seconds", CAL_U_TIME, "s", x, y, 4, &n, why),
                     CAL_EPROTO);                     /* an empty cell */
    assert_int_equal(csv2("1 2\n3 4\n5 6\n7 8\n9 10\n", "1", "2", CAL_U_RATIO, NULL, x, y, 4, &n,
                          why), CAL_ETOOBIG);
    assert_int_equal(csv2("1 2\n", "x", "y", CAL_U_RATIO, NULL, x, y, 4, &n, why), CAL_ENOTFOUND);
    char longline[5000];
    memset(longline, '1', sizeof longline - 1);
    longline[sizeof longline - 1] = '\0';
    assert_int_equal(csv2(longline, "1", "2", CAL_U_RATIO, NULL, x, y, 4, &n, why), CAL_ETOOBIG);
    char nul[] = "1 2\n3\0 4\n";
    cal_csv_col c[2] = {{"1", CAL_U_RATIO, NULL, x}, {"2", CAL_U_RATIO, NULL, y}};
    assert_int_equal(cal_csv_columns(nul, sizeof nul - 1, c, 2, 4, &n, why, 256), CAL_EPROTO);
}

static void test_csv_file(void **state)
{
    (void)state;
    char path[] = "/tmp/caliper-test-csv-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *t = "t,bytes\n0,1GB\n60,1.1GB\n";
    assert_int_equal(write(fd, t, strlen(t)), (ssize_t)strlen(t));
    close(fd);
    double x[4], y[4];
    size_t n;
    char why[256];
    cal_csv_col c[2] = {{"t", CAL_U_TIME, "s", x}, {"bytes", CAL_U_BYTES, "B", y}};
    assert_int_equal(cal_csv_columns_file(path, c, 2, 4, &n, why, sizeof why), CAL_OK);
    assert_int_equal(n, 2);
    NEAR(y[1], 1.1e9, 1e-3);
    unlink(path);
    assert_int_equal(cal_csv_columns_file(path, c, 2, 4, &n, why, sizeof why), CAL_ENOTFOUND);
}

static void test_fit_line(void **state)
{
    (void)state;
    double x[] = {512, 1024, 2048, 4096}, y[] = {0.61, 1.2, 2.3, 4.6};
    cal_linfit f;
    size_t i = 9, j = 9;
    assert_int_equal(cal_fit_line(x, y, 4, 3, 0.95, &f, &i, &j), CAL_OK);
    NEAR(f.b, 0.0011105638586956519, 1e-15);
    assert_int_equal(cal_fit_line(x, y, 2, 3, 0.95, &f, &i, &j), CAL_EINVAL);  /* too few */
    double xd[] = {512, 1024, 512, 4096};
    assert_int_equal(cal_fit_line(xd, y, 4, 3, 0.95, &f, &i, &j), CAL_ERANGE);
    assert_int_equal(i, 0);
    assert_int_equal(j, 2);
    double x2[] = {7, 7};
    assert_int_equal(cal_fit_line(x2, y, 2, 2, 0.95, &f, &i, &j), CAL_ERANGE);
}

/* t(n) = a + b·n plus a fixed ± wobble, so the CIs are finite. */
static void line(double a, double b, double *x, double *y)
{
    static const double n[] = {256, 512, 1024, 2048, 4096}, w[] = {2e-3, -3e-3, 1e-3, 2.5e-3, -2e-3};
    for (int i = 0; i < 5; i++) { x[i] = n[i]; y[i] = a + b * n[i] + w[i]; }
}

static void test_prefill_verdict(void **state)
{
    (void)state;
    double x[5], y[5];
    cal_linfit before, over, tok, both, same;
    line(0.050, 1.0e-3, x, y); assert_int_equal(cal_stats_linfit(x, y, 5, 0.95, &before), 0);
    line(0.250, 1.0e-3, x, y); assert_int_equal(cal_stats_linfit(x, y, 5, 0.95, &over), 0);
    line(0.050, 1.3e-3, x, y); assert_int_equal(cal_stats_linfit(x, y, 5, 0.95, &tok), 0);
    line(0.250, 1.3e-3, x, y); assert_int_equal(cal_stats_linfit(x, y, 5, 0.95, &both), 0);
    line(0.051, 1.0e-3, x, y); assert_int_equal(cal_stats_linfit(x, y, 5, 0.95, &same), 0);
    cal_fit_delta da, db;
    assert_int_equal(cal_fit_delta_of(&before, &over, 'a', &da), CAL_OK);
    assert_int_equal(cal_fit_delta_of(&before, &over, 'b', &db), CAL_OK);
    NEAR(da.d, 0.2, 1e-9);
    assert_true(da.lo < 0.2 && da.hi > 0.2 && da.excludes_zero);
    assert_false(db.excludes_zero);
    assert_int_equal(cal_fit_prefill_verdict(&da, &db), CAL_PREFILL_OVERHEAD);
    cal_fit_delta_of(&before, &tok, 'a', &da);
    cal_fit_delta_of(&before, &tok, 'b', &db);
    NEAR(db.d, 0.3e-3, 1e-12);
    assert_int_equal(cal_fit_prefill_verdict(&da, &db), CAL_PREFILL_PER_TOKEN);
    cal_fit_delta_of(&before, &both, 'a', &da);
    cal_fit_delta_of(&before, &both, 'b', &db);
    assert_int_equal(cal_fit_prefill_verdict(&da, &db), CAL_PREFILL_BOTH);
    cal_fit_delta_of(&before, &same, 'a', &da);
    cal_fit_delta_of(&before, &same, 'b', &db);
    assert_int_equal(cal_fit_prefill_verdict(&da, &db), CAL_PREFILL_NO_CHANGE);
    /* equal residuals: Welch df = df1 + df2, CI = d ± t(6)·se */
    NEAR(da.df, 6, 1e-9);
    NEAR(da.hi - da.d, cal_stats_t_quantile(0.975, 6) * da.se, 1e-12);
    cal_linfit two;
    assert_int_equal(cal_stats_linfit(x, y, 2, 0.95, &two), 0);
    assert_int_equal(cal_fit_delta_of(&before, &two, 'a', &da), CAL_EINVAL);   /* no CI */
    assert_int_equal(cal_fit_delta_of(&before, &over, 'c', &da), CAL_EINVAL);
}

/* What a careless file does: each is an error, never a silent number. */
static void test_csv_bad_input(void **state)
{
    (void)state;
    double x[8], y[8];
    size_t n;
    char why[256];
    /* a decimal comma splits a cell in two: the row is rejected by name,
     * where it used to be read as y = 0 */
    assert_int_equal(csv2("n,seconds\n64,0.25\n128,0,1\n256,0.9\n", "n", "seconds", CAL_U_TIME,
                          "s", x, y, 8, &n, why), CAL_EPROTO);
    assert_non_null(strstr(why, "line 3"));
    assert_non_null(strstr(why, "3 fields"));
    /* a spreadsheet's UTF-8 BOM before the header */
    assert_int_equal(csv2("\xEF\xBB\xBFn,seconds\n64,0.25\n128,0.5\n", "n", "seconds",
                          CAL_U_TIME, "s", x, y, 8, &n, why), CAL_OK);
    assert_int_equal(n, 2);
    NEAR(y[1], 0.5, 0);
}

/* Values too large for the sums in doubles: an error, not R² = NaN, and not
 * a duplicate x that is not there. */
static void test_fit_overflow(void **state)
{
    (void)state;
    cal_linfit f = {.a = 7};
    size_t i = 9, j = 9;
    double x[] = {1, 2, 3}, y[] = {1e308, 1e308, 1e308};
    assert_int_equal(cal_fit_line(x, y, 3, 3, 0.95, &f, &i, &j), CAL_ETOOBIG);
    NEAR(f.a, 7, 0);                                  /* left as it was */
    double xb[] = {1e300, 2e300, 3e300}, yb[] = {1, 2, 3};
    assert_int_equal(cal_fit_line(xb, yb, 3, 3, 0.95, &f, &i, &j), CAL_ETOOBIG);
    assert_int_equal(i, 9);                           /* no duplicate named */
    double yc[] = {1e200, -1e200, 1e200};
    assert_int_equal(cal_fit_line(x, yc, 3, 3, 0.95, &f, &i, &j), CAL_ETOOBIG);
    double xn[] = {1, NAN, 3};
    assert_int_equal(cal_fit_line(xn, yb, 3, 3, 0.95, &f, &i, &j), CAL_EINVAL);
    /* large but fine */
    double xl[] = {1e100, 2e100, 3e100}, yl[] = {1e100, 2e100, 3e100};
    assert_int_equal(cal_fit_line(xl, yl, 3, 3, 0.95, &f, &i, &j), CAL_OK);
    NEAR(f.b, 1, 1e-12);
    /* distinct only by rounding: the fit's "all x equal" names rows 1 and 2 */
    double xr[] = {1, 1 + 1e-15, 1 - 1e-15};
    assert_int_equal(cal_fit_line(xr, yb, 3, 3, 0.95, &f, &i, &j), CAL_ERANGE);
    assert_int_equal(i, 0);
    assert_int_equal(j, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_ok),   cmocka_unit_test(test_csv_errors),
        cmocka_unit_test(test_csv_file), cmocka_unit_test(test_fit_line),
        cmocka_unit_test(test_prefill_verdict), cmocka_unit_test(test_csv_bad_input),
        cmocka_unit_test(test_fit_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
