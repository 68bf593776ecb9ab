/* Unit tests: credentials never leave a URL that is stored or printed —
 * cal_url_redact through libcurl's parser, and its failure cases, which
 * must never echo the input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/url.h"

static void redacts(const char *in, const char *want)
{
    char out[256];
    int rc = cal_url_redact(in, out, sizeof out);
    if (rc != CAL_OK || strcmp(out, want))
        fail_msg("cal_url_redact(\"%s\") = %d \"%s\", want \"%s\"", in, rc, out, want);
}

static void test_redact(void **state)
{
    (void)state;
    redacts("http://user:pass@127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1");
    redacts("https://token@example.com/", "https://example.com/");
    redacts("http://:onlypass@h:1/", "http://h:1/");
    redacts("http://u%40x:p%3Aw@h/path?q=1", "http://h/path?q=1");
    redacts("http://u:p@[::1]:9/", "http://[::1]:9/");
    /* nothing to remove: unchanged byte for byte (no trailing / added) */
    redacts("http://127.0.0.1:8000", "http://127.0.0.1:8000");
    redacts("https://example.com/v1/?a=b@c", "https://example.com/v1/?a=b@c");
    assert_int_equal(cal_url_has_credentials("http://a:b@h/"), 1);
    assert_int_equal(cal_url_has_credentials("http://h/"), 0);
    assert_int_equal(cal_url_has_credentials("not a url"), -1);
}

static void test_failures_never_echo(void **state)
{
    (void)state;
    char out[64];
    /* curl cannot parse it: a placeholder, never the text */
    assert_int_equal(cal_url_redact("http://u:secret@[::1/", out, sizeof out), CAL_EPROTO);
    assert_null(strstr(out, "secret"));
    assert_string_equal(out, CAL_URL_UNPARSABLE);
    /* too long for the buffer: the placeholder, cut to fit */
    char small[12];
    assert_int_equal(cal_url_redact("http://u:secret@host.example.com/", small, sizeof small), CAL_ETOOBIG);
    assert_null(strstr(small, "secret"));
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_int_equal(cal_url_redact(NULL, out, sizeof out), CAL_EINVAL);
    assert_string_equal(out, CAL_URL_UNPARSABLE);
    assert_int_equal(cal_url_redact("http://h/", out, 0), CAL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redact),
        cmocka_unit_test(test_failures_never_echo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
