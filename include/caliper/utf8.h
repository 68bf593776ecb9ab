/* caliper — UTF-8 validation for text that must round-trip through JSON
 * (labels): jansson refuses invalid UTF-8, so such text is refused where it
 * enters, with the offset of the first bad byte, never dropped later; and
 * counting code points (characters of a prompt or a reply). */
#ifndef CALIPER_UTF8_H
#define CALIPER_UTF8_H
#include <stddef.h>

/* The offset of the first byte of s[0..n) that does not start a well-formed
 * UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, nothing above
 * U+10FFFF, no truncated sequence), or n when all of it is valid. s may be
 * NULL only when n is 0. Allocates nothing. */
size_t cal_utf8_check(const char *s, size_t n);
/* Code points in s[len] (invalid UTF-8 bytes count one each). */
long cal_utf8_chars(const char *s, size_t len);

#endif
