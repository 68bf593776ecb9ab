/* Unit tests: the CSV module. RFC 4180 reading (quotes, CRLF/LF, BOM,
 * line numbers through quoted line breaks), every error with its line, the
 * bounds, the options, the writer's quoting and sticky errors, and the
 * named numeric columns (field count per row, BOM header). */
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
#include "caliper/csv.h"
#include "caliper/error.h"

static cal_csv_reader R;   /* 18 KB: kept off the test's stack */

static void start(const char *text, size_t len, const cal_csv_opts *o)
{
    cal_csv_reader_init(&R, text, len, o);
}

/* Next record must have exactly the given fields (NULL-terminated list). */
static void expect(size_t line, ...)
{
    size_t nf = 99;
    char why[256];
    assert_int_equal(cal_csv_next(&R, &nf, why, sizeof why), CAL_OK);
    va_list ap;
    va_start(ap, line);
    size_t k = 0;
    for (const char *s; (s = va_arg(ap, const char *)); k++) {
        assert_true(k < nf);
        assert_string_equal(R.field[k], s);
    }
    va_end(ap);
    assert_int_equal(nf, k);
    assert_int_equal(R.line, line);
}

static void expect_end(void)
{
    size_t nf = 99;
    assert_int_equal(cal_csv_next(&R, &nf, NULL, 0), CAL_OK);
    assert_int_equal(nf, 0);
}

static int next_err(char *why)
{
    size_t nf;
    return cal_csv_next(&R, &nf, why, 256);
}

static void test_read_rfc4180(void **state)
{
    (void)state;
    /* BOM, CRLF and LF mixed, quoted delimiter, doubled quote, line break in
     * quotes (the next record's line counts it), empty fields, no final EOL */
    const char *t = "\xEF\xBB\xBF" "a,b,c\r\n"
                    "\"x,y\",\"say \"\"hi\"\"\",\r\n"
                    "\"two\nlines\",,\"\"\n"
                    " 1 , 2,3";
    start(t, strlen(t), NULL);
    expect(1, "a", "b", "c", NULL);
    expect(2, "x,y", "say \"hi\"", "", NULL);
    expect(3, "two\nlines", "", "", NULL);
    expect(5, " 1 ", " 2", "3", NULL);          /* RFC 4180 keeps the spaces */
    expect_end();
    expect_end();
    /* an empty line is a record of one empty field; a lone CR ends a record */
    start("a\n\nb\rc\n", 7, NULL);
    expect(1, "a", NULL);
    expect(2, "", NULL);
    expect(3, "b", NULL);
    expect(4, "c", NULL);
    expect_end();
    /* nothing, or only a BOM: no records */
    start("", 0, NULL);
    expect_end();
    start("\xEF\xBB\xBF", 3, NULL);
    expect_end();
    start(NULL, 0, NULL);
    expect_end();
    /* a BOM anywhere else is data */
    start("a\n\xEF\xBB\xBFz\n", 7, NULL);
    expect(1, "a", NULL);
    expect(2, "\xEF\xBB\xBFz", NULL);
}

static void test_read_options(void **state)
{
    (void)state;
    cal_csv_opts o = {.delim = ';', .trim = 1, .comments = 1, .skip_blank = 1};
    const char *t = "# note\n  \n n ; \"t; s\" \n\n  # indented note\n1;2\n";
    start(t, strlen(t), &o);
    expect(3, "n", "t; s", NULL);
    expect(6, "1", "2", NULL);
    expect_end();
    /* blank-separated: runs of spaces and tabs, ends ignored, quotes kept */
    cal_csv_opts sp = {.delim = ' ', .skip_blank = 1};
    t = "  10 \t 1.5  \n\n\"a b\" 2\n";
    start(t, strlen(t), &sp);
    expect(1, "10", "1.5", NULL);
    expect(3, "a b", "2", NULL);
    expect_end();
    cal_csv_opts tab = {.delim = '\t'};
    start("a b\tc,d\n", 8, &tab);
    expect(1, "a b", "c,d", NULL);
    /* without comments, '#' is data */
    start("#x,1\n", 5, NULL);
    expect(1, "#x", "1", NULL);
}

static void test_read_errors(void **state)
{
    (void)state;
    char why[256];
    start("a,b\n\"open,c\nd\n", 14, NULL);
    expect(1, "a", "b", NULL);
    assert_int_equal(next_err(why), CAL_EPROTO);
    assert_non_null(strstr(why, "line 2"));
    assert_non_null(strstr(why, "not closed"));
    expect_end();                                  /* an error ends the reading */

    start("a,b\nx,y\"z\n", 10, NULL);
    expect(1, "a", "b", NULL);
    assert_int_equal(next_err(why), CAL_EPROTO);
    assert_non_null(strstr(why, "line 2"));
    assert_non_null(strstr(why, "quote inside"));

    start("\"a\nb\"c,d\n", 9, NULL);
    assert_int_equal(next_err(why), CAL_EPROTO);
    assert_non_null(strstr(why, "line 2"));       /* where the closing quote is */
    assert_non_null(strstr(why, "after the closing quote"));

    const char nul[] = "a,b\nc\0,d\n";
    start(nul, sizeof nul - 1, NULL);
    expect(1, "a", "b", NULL);
    assert_int_equal(next_err(why), CAL_EPROTO);
    assert_non_null(strstr(why, "NUL"));

    cal_csv_opts same = {.same_count = 1};
    start("a,b\n1,2\n3,4,5\n", 14, &same);
    expect(1, "a", "b", NULL);
    expect(2, "1", "2", NULL);
    assert_int_equal(next_err(why), CAL_EPROTO);
    assert_non_null(strstr(why, "line 3 has 3 fields"));
    assert_non_null(strstr(why, "has 2"));
}

static void test_read_bounds(void **state)
{
    (void)state;
    char why[256];
    static char big[CAL_CSV_RECORD_MAX * 2];
    /* a field of exactly max_field bytes passes, one more does not */
    cal_csv_opts o = {.max_field = 8};
    start("12345678,123456789\n", 19, &o);
    assert_int_equal(next_err(why), CAL_ETOOBIG);
    assert_non_null(strstr(why, "field 2"));
    assert_non_null(strstr(why, "8 bytes"));
    start("12345678\n", 9, &o);
    expect(1, "12345678", NULL);
    /* default field cap */
    memset(big, 'x', CAL_CSV_FIELD_MAX + 1);
    start(big, CAL_CSV_FIELD_MAX, NULL);
    size_t nf;
    assert_int_equal(cal_csv_next(&R, &nf, why, sizeof why), CAL_OK);
    assert_int_equal(strlen(R.field[0]), CAL_CSV_FIELD_MAX);
    start(big, CAL_CSV_FIELD_MAX + 1, NULL);
    assert_int_equal(next_err(why), CAL_ETOOBIG);
    /* a record over the record cap, in fields each under the field cap */
    size_t k = 0;
    while (k + 1001 < sizeof big) {
        memset(big + k, 'y', 1000);
        big[k + 1000] = ',';
        k += 1001;
    }
    start(big, k, NULL);
    assert_int_equal(next_err(why), CAL_ETOOBIG);
    assert_non_null(strstr(why, "record longer"));
    /* too many fields */
    memset(big, ',', CAL_CSV_FIELDS_MAX);
    start(big, CAL_CSV_FIELDS_MAX - 1, NULL);
    assert_int_equal(cal_csv_next(&R, &nf, why, sizeof why), CAL_OK);
    assert_int_equal(nf, CAL_CSV_FIELDS_MAX);
    start(big, CAL_CSV_FIELDS_MAX, NULL);
    assert_int_equal(next_err(why), CAL_ETOOBIG);
    assert_non_null(strstr(why, "more than 256 fields"));
}

static void test_write(void **state)
{
    (void)state;
    cal_buf b = CAL_BUF_INIT(0);
    cal_csv_writer w;
    cal_csv_writer_buf(&w, &b);
    assert_int_equal(cal_csv_put(&w, "plain"), CAL_OK);
    cal_csv_put(&w, "a,b");
    cal_csv_put(&w, "say \"hi\"");
    cal_csv_put(&w, "two\nlines");
    cal_csv_put(&w, " padded");
    cal_csv_put(&w, NULL);
    cal_csv_end_row(&w);
    cal_csv_put_num(&w, 0.25, 0);
    cal_csv_put_num(&w, NAN, 0);
    cal_csv_put_num(&w, INFINITY, 3);
    cal_csv_put_int(&w, -42);
    assert_int_equal(cal_csv_end_row(&w), CAL_OK);
    assert_string_equal(b.data, "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\" padded\",\n"
                                "0.25,,,-42\n");
    /* and it reads back as written */
    start(b.data, b.len, NULL);
    expect(1, "plain", "a,b", "say \"hi\"", "two\nlines", " padded", "", NULL);
    expect(3, "0.25", "", "", "-42", NULL);
    expect_end();
    cal_buf_free(&b);
    /* CRLF and another delimiter */
    cal_csv_writer_buf(&w, &b);
    w.crlf = 1;
    w.delim = ';';
    cal_csv_put(&w, "a,b");
    cal_csv_put(&w, "c;d");
    cal_csv_end_row(&w);
    assert_string_equal(b.data, "a,b;\"c;d\"\r\n");
    cal_buf_free(&b);
    /* the first error sticks */
    cal_buf small = CAL_BUF_INIT(8);
    cal_csv_writer_buf(&w, &small);
    assert_int_equal(cal_csv_put(&w, "12345"), CAL_OK);
    assert_int_equal(cal_csv_put(&w, "67890"), CAL_ETOOBIG);
    assert_int_equal(cal_csv_end_row(&w), CAL_ETOOBIG);
    assert_int_equal(cal_csv_put(&w, ""), CAL_ETOOBIG);
    cal_buf_free(&small);
    /* a FILE */
    FILE *f = tmpfile();
    assert_non_null(f);
    cal_csv_writer_file(&w, f);
    cal_csv_put(&w, "x\"y");
    cal_csv_put_num(&w, 1.5e9, 4);
    assert_int_equal(cal_csv_end_row(&w), CAL_OK);
    char got[64] = "";
    rewind(f);
    size_t n = fread(got, 1, sizeof got - 1, f);
    got[n] = '\0';
    fclose(f);
    assert_string_equal(got, "\"x\"\"y\",1.5e+09\n");
    /* one field into a buffer */
    char q[16];
    assert_int_equal(cal_csv_quote("a\"b", q, sizeof q), CAL_OK);
    assert_string_equal(q, "\"a\"\"b\"");
    assert_int_equal(cal_csv_quote("plain", q, sizeof q), CAL_OK);
    assert_string_equal(q, "plain");
    assert_int_equal(cal_csv_quote("0123456789,12345", q, sizeof q), CAL_ETOOBIG);
    assert_string_equal(q, "");
    /* a field that starts with a BOM keeps it (a reader skips one that
     * opens the file) */
    assert_int_equal(cal_csv_quote("\xEF\xBB\xBFx", q, sizeof q), CAL_OK);
    assert_string_equal(q, "\"\xEF\xBB\xBFx\"");
    start(q, strlen(q), NULL);
    expect(1, "\xEF\xBB\xBFx", NULL);
}

/* CSV injection (OWASP): a text cell a spreadsheet would run as a formula
 * is written with a ' before it, quoted; numbers, negative ones and text
 * that is a plain number included, are written as they are; and every cell
 * reads back as it was. */
static void test_write_formulas(void **state)
{
    (void)state;
    static const struct { const char *in, *out; } CASES[] = {
        {"=HYPERLINK(\"http://x\",\"y\")", "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\""},
        {"+cmd|' /C calc'!A0", "\"'+cmd|' /C calc'!A0\""},
        {"@SUM(1+1)", "\"'@SUM(1+1)\""},
        {"-2+3", "\"'-2+3\""},
        {"-", "\"'-\""},
        {"\tTAB=1", "\"'\tTAB=1\""},
        {"\r=1", "\"'\r=1\""},
        {"-2.5", "-2.5"},          /* a negative number stays a number */
        {"+7", "+7"},
        {"-1e-05", "-1e-05"},
        {"-.5", "-.5"},
        {"a=b", "a=b"},            /* only the first character counts */
        {"'quoted", "'quoted"},
    };
    char all[1024] = "";
    cal_buf b = CAL_BUF_INIT(0);
    cal_csv_writer w;
    cal_csv_writer_buf(&w, &b);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char q[128];
        assert_int_equal(cal_csv_quote(CASES[i].in, q, sizeof q), CAL_OK);
        assert_string_equal(q, CASES[i].out);
        strcat(all, i ? "," : "");
        strcat(all, CASES[i].out);
        cal_csv_put(&w, CASES[i].in);
    }
    cal_csv_end_row(&w);
    cal_csv_put_num(&w, -0.125, 0);   /* numeric cells: never marked */
    cal_csv_put_int(&w, -42);
    assert_int_equal(cal_csv_end_row(&w), CAL_OK);
    strcat(all, "\n-0.125,-42\n");
    assert_string_equal(b.data, all);
    /* caliper's reader gives back what was put */
    start(b.data, b.len, NULL);
    size_t nf;
    char why[128];
    assert_int_equal(cal_csv_next(&R, &nf, why, sizeof why), CAL_OK);
    assert_int_equal(nf, sizeof CASES / sizeof CASES[0]);
    for (size_t i = 0; i < nf; i++) assert_string_equal(R.field[i], CASES[i].in);
    expect(3, "-0.125", "-42", NULL);   /* the quoted CR was a line */
    expect_end();
    cal_buf_free(&b);
    /* an unquoted '= from elsewhere is read as it is */
    start("'=x,\"'=y\"\n", 10, NULL);
    expect(1, "'=x", "=y", NULL);
}

static void test_read_file(void **state)
{
    (void)state;
    char path[] = "/tmp/caliper-test-csvf-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "a,b\n1,2\n", 8), 8);
    close(fd);
    char *text = NULL, why[256];
    size_t len = 0;
    assert_int_equal(cal_csv_read_file(path, 100, &text, &len, why, sizeof why), CAL_OK);
    assert_int_equal(len, 8);
    assert_string_equal(text, "a,b\n1,2\n");
    free(text);
    assert_int_equal(cal_csv_read_file(path, 8, &text, &len, why, sizeof why), CAL_OK);
    free(text);
    assert_int_equal(cal_csv_read_file(path, 7, &text, &len, why, sizeof why), CAL_ETOOBIG);
    assert_null(text);
    assert_non_null(strstr(why, path));
    unlink(path);
    assert_int_equal(cal_csv_read_file(path, 100, &text, &len, why, sizeof why), CAL_ENOTFOUND);
    assert_non_null(strstr(why, path));
}

static int cols2(const char *t, double *x, double *y, char *why)
{
    size_t n = 0;
    cal_csv_col c[2] = {{"n", CAL_U_COUNT, NULL, x}, {"t", CAL_U_TIME, "s", y}};
    int rc = cal_csv_columns(t, strlen(t), c, 2, 8, &n, why, 256);
    return rc ? rc : (int)n;
}

static void test_columns(void **state)
{
    (void)state;
    double x[8], y[8];
    char why[256];
    /* a BOM before the header (as spreadsheets save "CSV UTF-8") */
    assert_int_equal(cols2("\xEF\xBB\xBFn,t\r\n128,0.5\r\n256,0.9\r\n", x, y, why), 2);
    assert_true(x[1] == 256 && y[0] == 0.5);
    /* a decimal comma: more fields than the header, named by line and row */
    assert_int_equal(cols2("n,t\n64,0.25\n128,0,1\n", x, y, why), CAL_EPROTO);
    assert_non_null(strstr(why, "line 3 (data row 2) has 3 fields"));
    assert_non_null(strstr(why, "header has 2"));
    assert_non_null(strstr(why, "decimal comma"));
    /* fewer fields, and no header: against the first row */
    cal_csv_col c[1] = {{"1", CAL_U_RATIO, NULL, x}};
    size_t n;
    assert_int_equal(cal_csv_columns("1 2\n3 4\n5\n", 10, c, 1, 8, &n, why, 256), CAL_EPROTO);
    assert_non_null(strstr(why, "line 3 (data row 3) has 1 field where the first row has 2"));
    /* a quoted cell with a comma is one field (and here not a number) */
    assert_int_equal(cols2("n,t\n128,\"0,5\"\n", x, y, why), CAL_EPROTO);
    assert_non_null(strstr(why, "\"0,5\""));
    /* semicolons: a decimal comma is then one field that is not a number */
    assert_int_equal(cols2("n;t\n128;0,5\n", x, y, why), CAL_EPROTO);
    assert_non_null(strstr(why, "line 2"));
    /* malformed CSV is named too */
    assert_int_equal(cols2("n,t\n1,\"2\n", x, y, why), CAL_EPROTO);
    assert_non_null(strstr(why, "not closed"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_rfc4180), cmocka_unit_test(test_read_options),
        cmocka_unit_test(test_read_errors),  cmocka_unit_test(test_read_bounds),
        cmocka_unit_test(test_write),        cmocka_unit_test(test_read_file),
        cmocka_unit_test(test_write_formulas),
        cmocka_unit_test(test_columns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
