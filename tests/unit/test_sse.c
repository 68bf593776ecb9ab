/* SSE parser and chunk interpreter on golden captures (tests/data/sse/X.txt,
 * the expected parse in X.expect, written by hand): every 2-way split of each
 * capture, and a one-byte-at-a-time feed, must give the same events. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "caliper/probe.h"

#define DATA_DIR "tests/data/sse"

typedef struct summary {
    cal_buf events;             /* every event's data, each followed by \x1e */
    cal_buf text;
    int n_events, done, text_chunks, finish, prompt, completion, errors, malformed;
    double decode_ms;
} summary;

static int collect(void *ud, const char *data, size_t len)
{
    summary *s = ud;
    s->n_events++;
    assert_int_equal(cal_buf_append(&s->events, data, len), CAL_OK);
    assert_int_equal(cal_buf_append(&s->events, "\x1e", 1), CAL_OK);
    cal_chunk c;
    int rc = cal_chunk_parse(data, len, &c, &s->text);
    if (rc == CAL_EPROTO) { s->malformed++; return 0; }
    assert_int_equal(rc, CAL_OK);
    if (c.flags & CAL_CHUNK_DONE) s->done = 1;
    if (c.flags & CAL_CHUNK_TEXT) s->text_chunks++;
    if (c.flags & CAL_CHUNK_FINISH) s->finish = 1;
    if (c.flags & CAL_CHUNK_ERROR) { s->errors++; assert_true(c.error[0] != '\0'); }
    if (c.flags & CAL_CHUNK_USAGE) { s->prompt = c.prompt_tokens; s->completion = c.completion_tokens; }
    if (c.flags & CAL_CHUNK_TIMINGS) s->decode_ms = c.decode_ms;
    return 0;
}

/* Feed bytes split at the given offsets; render the summary as in .expect. */
static void parse_split(const char *b, size_t n, const size_t *cuts, size_t ncuts,
                        cal_buf *render, cal_buf *events)
{
    summary s;
    memset(&s, 0, sizeof s);
    s.events = (cal_buf)CAL_BUF_INIT(1 << 20);
    s.text = (cal_buf)CAL_BUF_INIT(1 << 20);
    s.prompt = s.completion = -1;
    s.decode_ms = -1;
    cal_sse *p = NULL;
    assert_int_equal(cal_sse_open(4096, collect, &s, &p), CAL_OK);
    size_t at = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : n;
        assert_int_equal(cal_sse_feed(p, b + at, to - at), CAL_OK);
        at = to;
    }
    int clean = cal_sse_finish(p) == CAL_OK;
    cal_sse_close(&p);
    assert_null(p);
    cal_buf_reset(render);
    cal_buf_printf(render, "events %d\ndone %d\ntext_chunks %d\nfinish %d\nprompt_tokens %d\n"
                   "completion_tokens %d\ndecode_ms %.3f\nerrors %d\nclean %d\nmalformed %d\ntext \"",
                   s.n_events, s.done, s.text_chunks, s.finish, s.prompt, s.completion,
                   s.decode_ms, s.errors, clean, s.malformed);
    for (size_t i = 0; i < s.text.len; i++) {
        char ch = s.text.data[i];
        if (ch == '\n') cal_buf_puts(render, "\\n");
        else if (ch == '"' || ch == '\\') cal_buf_printf(render, "\\%c", ch);
        else cal_buf_append(render, &ch, 1);
    }
    cal_buf_puts(render, "\"\n");
    cal_buf_reset(events);
    if (s.events.len) cal_buf_append(events, s.events.data, s.events.len);
    cal_buf_free(&s.events);
    cal_buf_free(&s.text);
}

static int read_file(const char *path, cal_buf *out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char tmp[4096];
    size_t r;
    cal_buf_reset(out);
    while ((r = fread(tmp, 1, sizeof tmp, f)) > 0) cal_buf_append(out, tmp, r);
    fclose(f);
    return 0;
}

static void test_golden_captures(void **state)
{
    (void)state;
    DIR *d = opendir(DATA_DIR);
    assert_non_null(d);
    struct dirent *e;
    int files = 0;
    cal_buf cap = CAL_BUF_INIT(1 << 20), exp = CAL_BUF_INIT(1 << 20);
    cal_buf r0 = CAL_BUF_INIT(1 << 20), ev0 = CAL_BUF_INIT(1 << 20);
    cal_buf r1 = CAL_BUF_INIT(1 << 20), ev1 = CAL_BUF_INIT(1 << 20);
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 8 || strcmp(e->d_name + l - 7, ".expect") != 0) continue;
        char path[512];
        snprintf(path, sizeof path, DATA_DIR "/%.*s.txt", (int)(l - 7), e->d_name);
        assert_int_equal(read_file(path, &cap), 0);
        snprintf(path, sizeof path, DATA_DIR "/%s", e->d_name);
        assert_int_equal(read_file(path, &exp), 0);
        parse_split(cap.data, cap.len, NULL, 0, &r0, &ev0);
        if (strcmp(r0.data, exp.data) != 0)
            fail_msg("%s: parse differs from the expected\n--- got\n%s--- expected\n%s",
                     e->d_name, r0.data, exp.data);
        for (size_t k = 0; k <= cap.len; k++) {         /* every 2-way split */
            parse_split(cap.data, cap.len, &k, 1, &r1, &ev1);
            if (strcmp(r1.data, r0.data) != 0 || ev1.len != ev0.len
                || (ev0.len && memcmp(ev1.data, ev0.data, ev0.len) != 0))
                fail_msg("%s: split at byte %zu gives a different parse", e->d_name, k);
        }
        size_t *cuts = malloc(cap.len * sizeof *cuts);    /* one byte at a time */
        for (size_t k = 0; k < cap.len; k++) cuts[k] = k;
        parse_split(cap.data, cap.len, cuts, cap.len, &r1, &ev1);
        free(cuts);
        assert_string_equal(r1.data, r0.data);
        files++;
    }
    closedir(d);
    assert_true(files >= 8);
    cal_buf_free(&cap); cal_buf_free(&exp);
    cal_buf_free(&r0); cal_buf_free(&ev0); cal_buf_free(&r1); cal_buf_free(&ev1);
}

static int count_cb(void *ud, const char *data, size_t len)
{
    (void)data; (void)len;
    return ++*(int *)ud >= 2 ? 42 : 0;          /* stop at the second event */
}

static void test_sse_limits_and_stop(void **state)
{
    (void)state;
    int n = 0;
    cal_sse *p = NULL;
    assert_int_equal(cal_sse_open(64, count_cb, &n, &p), CAL_OK);
    /* the callback's non-zero return stops the feed and comes back */
    const char *two = "data: a\n\ndata: b\n\ndata: c\n\n";
    assert_int_equal(cal_sse_feed(p, two, strlen(two)), 42);
    assert_int_equal(n, 2);
    /* an event over the cap is CAL_ETOOBIG, across feeds too */
    cal_sse_finish(p);
    n = -100;
    char big[200];
    memset(big, 'x', sizeof big);
    assert_int_equal(cal_sse_feed(p, "data: ", 6), CAL_OK);
    assert_int_equal(cal_sse_feed(p, big, sizeof big), CAL_ETOOBIG);
    cal_sse_finish(p);
    /* multi-line data over the cap, each line under it */
    int rc = CAL_OK;
    for (int i = 0; i < 10 && rc == CAL_OK; i++) rc = cal_sse_feed(p, "data: 0123456789\n", 17);
    assert_int_equal(rc, CAL_ETOOBIG);
    /* finish: a cut inside an event is reported, and the parser is reusable */
    assert_int_equal(cal_sse_finish(p), CAL_EPROTO); /* the cut event is reported */
    assert_int_equal(cal_sse_feed(p, "data: x", 7), CAL_OK);
    assert_int_equal(cal_sse_finish(p), CAL_EPROTO);
    assert_int_equal(cal_sse_feed(p, "data: x\n", 8), CAL_OK);
    assert_int_equal(cal_sse_finish(p), CAL_EPROTO); /* no blank line: dropped */
    n = 0;
    assert_int_equal(cal_sse_feed(p, ":c\r\n\r\ndata: y\r\n\r\n", 17), CAL_OK);
    assert_int_equal(n, 1);
    assert_int_equal(cal_sse_finish(p), CAL_OK);
    assert_int_equal(cal_sse_feed(NULL, "x", 1), CAL_EINVAL);
    assert_int_equal(cal_sse_open(0, NULL, NULL, &p), CAL_EINVAL);
    cal_sse_close(&p);
    assert_null(p);
    cal_sse_close(&p);                           /* closing NULL is fine */
}

static void test_chunk_shapes(void **state)
{
    (void)state;
    cal_chunk c;
    cal_buf t = CAL_BUF_INIT(1024);
    /* role-only opening chunk: no text, so no token chunk (vLLM PR #46652) */
    const char *role = "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}";
    assert_int_equal(cal_chunk_parse(role, strlen(role), &c, &t), CAL_OK);
    assert_false(c.flags & CAL_CHUNK_TEXT);
    assert_int_equal(t.len, 0);
    /* tool-call arguments are generated text */
    const char *tool = "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\\\"\"}}]}}]}";
    assert_int_equal(cal_chunk_parse(tool, strlen(tool), &c, &t), CAL_OK);
    assert_true(c.flags & CAL_CHUNK_TEXT);
    assert_string_equal(t.data, "{\"a\"");
    cal_buf_reset(&t);
    /* a whole non-streaming chat answer */
    const char *whole = "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"hi there\"},"
                        "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}";
    assert_int_equal(cal_chunk_parse(whole, strlen(whole), &c, &t), CAL_OK);
    assert_true((c.flags & (CAL_CHUNK_TEXT | CAL_CHUNK_FINISH | CAL_CHUNK_USAGE))
                == (CAL_CHUNK_TEXT | CAL_CHUNK_FINISH | CAL_CHUNK_USAGE));
    assert_int_equal(c.completion_tokens, 2);
    assert_int_equal(c.prompt_tokens, 3);
    assert_string_equal(t.data, "hi there");
    /* usage: null (vLLM's continuous chunks) is not usage */
    const char *nul = "{\"choices\":[{\"text\":\"a\"}],\"usage\":null,\"send_ns\":123456789012}";
    assert_int_equal(cal_chunk_parse(nul, strlen(nul), &c, NULL), CAL_OK);
    assert_false(c.flags & CAL_CHUNK_USAGE);
    assert_int_equal(c.completion_tokens, -1);
    assert_true(c.flags & CAL_CHUNK_SEND_NS);
    assert_true(c.send_ns == 123456789012LL);
    /* a NUL byte is valid JSON text (byte-level tokenizers emit it) */
    const char *nulch = "{\"choices\":[{\"text\":\"\\u0000\"}]}";
    assert_int_equal(cal_chunk_parse(nulch, strlen(nulch), &c, NULL), CAL_OK);
    assert_true(c.flags & CAL_CHUNK_TEXT);
    assert_int_equal(c.text_bytes, 1);
    /* the sentinel, with stray whitespace */
    assert_int_equal(cal_chunk_parse(" [DONE] ", 8, &c, NULL), CAL_OK);
    assert_int_equal(c.flags, CAL_CHUNK_DONE);
    /* not JSON objects */
    assert_int_equal(cal_chunk_parse("[1,2]", 5, &c, NULL), CAL_EPROTO);
    assert_int_equal(cal_chunk_parse("{\"a\":", 5, &c, NULL), CAL_EPROTO);
    assert_int_equal(cal_chunk_parse("DONE", 4, &c, NULL), CAL_EPROTO);
    /* error as a bare string */
    assert_int_equal(cal_chunk_parse("{\"error\":\"boom\"}", 16, &c, NULL), CAL_OK);
    assert_true(c.flags & CAL_CHUNK_ERROR);
    assert_string_equal(c.error, "boom");
    /* text over the buffer's cap: CAL_ETOOBIG, chunk still filled */
    cal_buf small = CAL_BUF_INIT(2);
    const char *three = "{\"choices\":[{\"text\":\"abc\",\"finish_reason\":\"length\"}]}";
    assert_int_equal(cal_chunk_parse(three, strlen(three), &c, &small), CAL_ETOOBIG);
    assert_true(c.flags & CAL_CHUNK_FINISH);
    assert_int_equal(c.text_bytes, 3);
    cal_buf_free(&small);
    cal_buf_free(&t);
}

/* Implausible server numbers are absent, not stored: predicted_ms 1e308
 * (a decode rate of ~0), a negative prompt_ms, 2.7 or 2^40 tokens. Each is
 * counted in implausible; the plausible ones beside them are kept. */
static void test_chunk_implausible_timings(void **state)
{
    (void)state;
    cal_chunk c;
    const char *huge = "{\"choices\":[{\"text\":\"\",\"finish_reason\":\"stop\"}],"
                       "\"timings\":{\"prompt_ms\":12.5,\"predicted_ms\":1e308,\"predicted_n\":64}}";
    assert_int_equal(cal_chunk_parse(huge, strlen(huge), &c, NULL), CAL_OK);
    assert_true(c.decode_ms < 0);                    /* absent */
    assert_true(c.prefill_ms == 12.5);               /* kept */
    assert_int_equal(c.decode_tokens, 64);
    assert_int_equal(c.implausible, 1);
    assert_true(c.flags & CAL_CHUNK_IMPLAUSIBLE);
    assert_true(c.flags & CAL_CHUNK_TIMINGS);        /* prompt_ms still reaches the result */
    const char *neg = "{\"timings\":{\"prompt_ms\":-3,\"predicted_ms\":2e9,\"predicted_n\":2.7,"
                      "\"cache_n\":1099511627776},\"usage\":{\"prompt_tokens\":-1,"
                      "\"completion_tokens\":5000000000}}";
    assert_int_equal(cal_chunk_parse(neg, strlen(neg), &c, NULL), CAL_OK);
    assert_true(c.prefill_ms < 0 && c.decode_ms < 0);
    assert_int_equal(c.decode_tokens, -1);
    assert_int_equal(c.cached_tokens, -1);
    assert_int_equal(c.prompt_tokens, -1);
    assert_int_equal(c.completion_tokens, -1);
    assert_false(c.flags & (CAL_CHUNK_TIMINGS | CAL_CHUNK_USAGE));
    assert_int_equal(c.implausible, 6);
    /* the bounds themselves are plausible */
    const char *edge = "{\"timings\":{\"prompt_ms\":0,\"predicted_ms\":1e9,\"predicted_n\":1000000000}}";
    assert_int_equal(cal_chunk_parse(edge, strlen(edge), &c, NULL), CAL_OK);
    assert_true(c.decode_ms == 1e9);
    assert_int_equal(c.decode_tokens, 1000000000);
    assert_int_equal(c.implausible, 0);
    assert_false(c.flags & CAL_CHUNK_IMPLAUSIBLE);
}

/* A parse's allocations come from a fixed block and spill to malloc: text
 * far past the block (an escape makes yajl decode it into a growing buffer)
 * and nesting past it (yajl's stack grows) read the same as small ones, and
 * integers past the fast path's 18 digits still go through the full reader. */
static void test_chunk_large_and_deep(void **state)
{
    (void)state;
    cal_chunk c;
    enum { TEXT = 40000, DEPTH = 1500 };
    cal_buf ev = CAL_BUF_INIT((size_t)1 << 20), t = CAL_BUF_INIT((size_t)1 << 20);
    assert_int_equal(cal_buf_puts(&ev, "{\"choices\":[{\"text\":\"\\n"), CAL_OK);
    for (int i = 0; i < TEXT; i++) assert_int_equal(cal_buf_append(&ev, i % 2 ? "b" : "a", 1), CAL_OK);
    assert_int_equal(cal_buf_puts(&ev, "\"}],\"skip\":"), CAL_OK);
    for (int i = 0; i < DEPTH; i++) assert_int_equal(cal_buf_append(&ev, "[", 1), CAL_OK);
    for (int i = 0; i < DEPTH; i++) assert_int_equal(cal_buf_append(&ev, "]", 1), CAL_OK);
    assert_int_equal(cal_buf_puts(&ev, ",\"usage\":{\"prompt_tokens\":-7,"
                                        "\"completion_tokens\":1234567890123456789}}"), CAL_OK);
    assert_int_equal(cal_chunk_parse(ev.data, ev.len, &c, &t), CAL_OK);
    assert_true(c.flags & CAL_CHUNK_TEXT);
    assert_int_equal(c.text_bytes, TEXT + 1);
    assert_int_equal(t.len, TEXT + 1);
    assert_int_equal(t.data[0], '\n');
    assert_int_equal(t.data[1], 'a');
    assert_int_equal(t.data[TEXT], 'b');
    assert_int_equal(c.prompt_tokens, -1);             /* negative counts read as absent */
    assert_int_equal(c.completion_tokens, -1);  /* 19 digits: the full reader; past 1e9, absent */
    assert_int_equal(c.implausible, 2);
    const char *past = "{\"usage\":{\"completion_tokens\":12345678901234567890}}";
    assert_int_equal(cal_chunk_parse(past, strlen(past), &c, NULL), CAL_EPROTO);   /* past int64 */
    /* the same shape once more, now with counts the fast path reads */
    const char *small = "{\"choices\":[{\"text\":\"x\"}],\"usage\":{\"prompt_tokens\":999999999999999999,"
                        "\"completion_tokens\":42},\"send_ns\":-5}";
    assert_int_equal(cal_chunk_parse(small, strlen(small), &c, NULL), CAL_OK);
    assert_int_equal(c.completion_tokens, 42);
    assert_int_equal(c.prompt_tokens, -1);             /* past 1e9: absent, not clamped */
    assert_true(c.send_ns == -5);
    cal_buf_free(&ev);
    cal_buf_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_captures),
        cmocka_unit_test(test_sse_limits_and_stop),
        cmocka_unit_test(test_chunk_shapes),
        cmocka_unit_test(test_chunk_implausible_timings),
        cmocka_unit_test(test_chunk_large_and_deep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
