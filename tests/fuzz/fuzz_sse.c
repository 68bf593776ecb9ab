/* libFuzzer target: the SSE parser and the chunk interpreter together, fed
 * in pieces whose sizes come from the input itself, with a small event cap so
 * the cap path is reached. Also built as a corpus replay for `make test`. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "caliper/probe.h"

static int on_event(void *ud, const char *data, size_t len)
{
    cal_buf *text = ud;
    cal_chunk c;
    int rc = cal_chunk_parse(data, len, &c, text);
    if (rc != CAL_OK && rc != CAL_EPROTO && rc != CAL_ETOOBIG) __builtin_trap();
    if (c.error[sizeof c.error - 1] != '\0') __builtin_trap();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned step = data[0] % 17;          /* 0: whole input at once */
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    cal_buf text = CAL_BUF_INIT(4096);
    cal_sse *s = NULL;
    if (cal_sse_open(2048, on_event, &text, &s) != CAL_OK) return 0;
    size_t at = 0;
    while (at < n) {
        size_t k = step ? step : n;
        if (k > n - at) k = n - at;
        int rc = cal_sse_feed(s, p + at, k);
        if (rc != CAL_OK && rc != CAL_ETOOBIG) __builtin_trap();
        if (rc == CAL_ETOOBIG) cal_sse_finish(s);
        at += k;
    }
    cal_sse_finish(s);
    cal_sse_close(&s);
    cal_buf_free(&text);
    return 0;
}
