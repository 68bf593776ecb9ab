/* Capped growable buffer. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "lib/util/c_locale.h"

#define CAL_BUF_DEFAULT_MAX ((size_t)64 << 20)

static size_t cap_of(const cal_buf *b) { return b->max ? b->max : CAL_BUF_DEFAULT_MAX; }

static int reserve(cal_buf *b, size_t need)
{
    if (need > cap_of(b)) return CAL_ETOOBIG;
    if (need + 1 <= b->alloc) return CAL_OK;
    size_t a = b->alloc ? b->alloc : 256;
    while (a < need + 1) a *= 2;
    if (a > cap_of(b) + 1) a = cap_of(b) + 1;
    char *p = realloc(b->data, a);
    if (!p) return CAL_ENOMEM;
    b->data = p;
    b->alloc = a;
    return CAL_OK;
}

int cal_buf_append(cal_buf *b, const void *p, size_t n)
{
    if (n > cap_of(b) - b->len) return CAL_ETOOBIG;
    int rc = reserve(b, b->len + n);
    if (rc) return rc;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return CAL_OK;
}

int cal_buf_puts(cal_buf *b, const char *s) { return cal_buf_append(b, s, strlen(s)); }

int cal_buf_printf(cal_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = cal_vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return CAL_EINVAL;
    if ((size_t)n > cap_of(b) - b->len) return CAL_ETOOBIG;
    int rc = reserve(b, b->len + (size_t)n);
    if (rc) return rc;
    va_start(ap, fmt);
    cal_vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return CAL_OK;
}

void cal_buf_consume(cal_buf *b, size_t n)
{
    if (n >= b->len) { cal_buf_reset(b); return; }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

void cal_buf_reset(cal_buf *b)
{
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

void cal_buf_free(cal_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->alloc = 0;
}
