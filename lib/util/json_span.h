/* Walking a large JSON array one element at a time: the byte span of each
 * element is found by brackets and strings alone (no decoding, no
 * allocation), so an array can be counted against its cap before anything
 * is decoded, and then decoded element by element (json_loadb on a span)
 * with memory bounded by the largest element, not the whole tree. The spans
 * are not validated: jansson checks each when it decodes it. Internal to
 * the library: not installed. */
#ifndef CALIPER_JSON_SPAN_H
#define CALIPER_JSON_SPAN_H
#include <stddef.h>

/* b[*i] after whitespace must be '[': *i moves past it. 0, or -1 when not. */
int    cal_jspan_open_array(const char *b, size_t n, size_t *i);
/* The next element of an array whose '[' was passed: *start, *len its span;
 * *i moves past it and the ',' after it. 1 an element, 0 the array closed
 * (*i past its ']'), -1 unbalanced or not an array's syntax. */
int    cal_jspan_next(const char *b, size_t n, size_t *i, size_t *start, size_t *len);
/* The elements of the array at b[*i], counted up to `stop` + 1 (enough to
 * say "over stop"); *i is left alone. -1 when not an array. */
long   cal_jspan_count(const char *b, size_t n, size_t i, size_t stop);
/* The value of member `key` of the object at b[0..n) (top level only; the
 * key compared as written, without unescaping): *start, *len its span.
 * 1 found, 0 absent, -1 not an object's syntax. */
int    cal_jspan_member(const char *b, size_t n, const char *key, size_t *start, size_t *len);
/* The 1-based line of byte at in b. */
size_t cal_jspan_line(const char *b, size_t at);

#endif
