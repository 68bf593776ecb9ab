/* caliper — a growable byte buffer with a hard cap (curl's dynbuf idea).
 * Every buffer fed from outside (SSE lines, HTTP bodies, JSON) has one:
 * exceeding the cap is CAL_ETOOBIG, never a crash or an unbounded heap.
 * The buffer owns data; cal_buf_free releases it. data is always
 * NUL-terminated when non-NULL, so it can be read as a C string. */
#ifndef CALIPER_BUF_H
#define CALIPER_BUF_H
#include <stddef.h>

typedef struct cal_buf {
    char  *data;   /* NULL until the first append */
    size_t len;    /* bytes used, excluding the NUL */
    size_t alloc;  /* bytes allocated */
    size_t max;    /* cap on len; 0 means the default cap of 64 MiB */
} cal_buf;

#define CAL_BUF_INIT(maxbytes) { NULL, 0, 0, (maxbytes) }

/* Append n bytes. CAL_ETOOBIG if len + n > max (buffer unchanged),
 * CAL_ENOMEM on allocation failure (buffer unchanged). */
int  cal_buf_append(cal_buf *b, const void *p, size_t n);
int  cal_buf_puts(cal_buf *b, const char *s);
/* printf-style append; same errors. */
int  cal_buf_printf(cal_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Drop the first n bytes (n <= len), keeping the rest. */
void cal_buf_consume(cal_buf *b, size_t n);
void cal_buf_reset(cal_buf *b);          /* len = 0, keeps memory */
void cal_buf_free(cal_buf *b);           /* frees data, len = alloc = 0 */

#endif
