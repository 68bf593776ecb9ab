/* SSE parser (WHATWG "event stream" interpretation) for the probe: bytes in
 * any split, LF / CRLF / CR line ends, comments, multi-line data. Buffers are
 * capped and reused, so a long stream allocates only while they grow. */
#include <stdlib.h>
#include <string.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "caliper/probe.h"

struct cal_sse {
    cal_buf line;          /* partial line carried between feeds */
    cal_buf data;          /* data lines of the pending event, "\n"-joined */
    int     has_data;      /* a data field was seen since the last dispatch */
    int     skip_lf;       /* the previous byte was CR: an LF next is its pair */
    int     started;       /* first byte seen (for the BOM check) */
    size_t  bom;           /* bytes of a UTF-8 BOM matched so far */
    cal_sse_event_fn fn;
    void   *ud;
};

int cal_sse_open(size_t max_event_bytes, cal_sse_event_fn fn, void *ud, cal_sse **out)
{
    if (!out || !fn) return CAL_EINVAL;
    if (max_event_bytes == 0) max_event_bytes = (size_t)1 << 20;
    cal_sse *s = calloc(1, sizeof *s);
    if (!s) return CAL_ENOMEM;
    s->line.max = max_event_bytes;
    s->data.max = max_event_bytes;
    s->fn = fn;
    s->ud = ud;
    *out = s;
    return CAL_OK;
}

void cal_sse_close(cal_sse **ps)
{
    if (!ps || !*ps) return;
    cal_buf_free(&(*ps)->line);
    cal_buf_free(&(*ps)->data);
    free(*ps);
    *ps = NULL;
}

/* One complete line (without its terminator). */
static int on_line(cal_sse *s, const char *p, size_t n)
{
    if (n == 0) {                       /* blank line: dispatch */
        if (!s->has_data) return CAL_OK;
        size_t len = s->data.len;
        if (len && s->data.data[len - 1] == '\n') len--;
        s->has_data = 0;
        int rc = s->fn(s->ud, s->data.data ? s->data.data : "", len);
        cal_buf_reset(&s->data);
        return rc;
    }
    if (p[0] == ':') return CAL_OK;     /* comment / keep-alive */
    const char *colon = memchr(p, ':', n);
    size_t flen = colon ? (size_t)(colon - p) : n;
    if (flen != 4 || memcmp(p, "data", 4) != 0) return CAL_OK;  /* event/id/retry */
    const char *v = colon ? colon + 1 : p + n;
    size_t vlen = (size_t)(p + n - v);
    if (vlen && *v == ' ') { v++; vlen--; }
    int rc = cal_buf_append(&s->data, v, vlen);
    if (rc == CAL_OK) rc = cal_buf_append(&s->data, "\n", 1);
    if (rc) return rc;
    s->has_data = 1;
    return CAL_OK;
}

int cal_sse_feed(cal_sse *s, const char *bytes, size_t n)
{
    if (!s || (!bytes && n)) return CAL_EINVAL;
    const char *p = bytes, *end = bytes + n;
    while (!s->started && p < end) {    /* a UTF-8 BOM may open the stream */
        static const unsigned char bom[3] = {0xEF, 0xBB, 0xBF};
        if ((unsigned char)*p == bom[s->bom]) {
            p++;
            if (++s->bom == 3) s->started = 1;
            continue;
        }
        if (s->bom) {                   /* a partial BOM was data after all */
            int rc = cal_buf_append(&s->line, bom, s->bom);
            if (rc) return rc;
        }
        s->started = 1;
    }
    while (p < end) {
        if (s->skip_lf) {
            s->skip_lf = 0;
            if (*p == '\n') { p++; continue; }
        }
        /* the next CR or LF: memchr scans a word at a time */
        const char *q = memchr(p, '\n', (size_t)(end - p));
        const char *cr = memchr(p, '\r', (size_t)((q ? q : end) - p));
        if (cr) q = cr;
        if (!q) q = end;
        if (q == end) {                 /* partial line: keep it */
            return cal_buf_append(&s->line, p, (size_t)(end - p));
        }
        int rc;
        if (s->line.len) {
            rc = cal_buf_append(&s->line, p, (size_t)(q - p));
            if (rc == CAL_OK) rc = on_line(s, s->line.data, s->line.len);
            cal_buf_reset(&s->line);
        } else {
            rc = on_line(s, p, (size_t)(q - p));
        }
        if (rc) return rc;
        if (*q == '\r') s->skip_lf = 1;
        p = q + 1;
    }
    return CAL_OK;
}

int cal_sse_finish(cal_sse *s)
{
    if (!s) return CAL_EINVAL;
    /* A last line without a terminator, or data without the blank line that
     * dispatches it, is an unterminated event: dropped, and reported. */
    int clean = s->line.len == 0 && !s->has_data;
    cal_buf_reset(&s->line);
    cal_buf_reset(&s->data);
    s->has_data = 0;
    s->skip_lf = 0;
    s->started = 0;
    s->bom = 0;
    return clean ? CAL_OK : CAL_EPROTO;
}
