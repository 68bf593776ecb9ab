/* Strict UTF-8 validation (RFC 3629, table 3-7 of the Unicode standard).
 * jansson checks the same rules inside json_string() but does not export
 * the check, and json_string() also returns NULL when out of memory, which
 * would make an allocation failure look like bad input. */
#include "caliper/utf8.h"

size_t cal_utf8_check(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len;
        unsigned lo = 0x80, hi = 0xbf;   /* the second byte's range */
        if (c < 0x80) { i++; continue; }
        else if (c >= 0xc2 && c <= 0xdf) len = 2;
        else if (c == 0xe0) { len = 3; lo = 0xa0; }
        else if (c == 0xed) { len = 3; hi = 0x9f; }          /* no surrogates */
        else if (c >= 0xe1 && c <= 0xef) len = 3;
        else if (c == 0xf0) { len = 4; lo = 0x90; }
        else if (c == 0xf4) { len = 4; hi = 0x8f; }          /* ≤ U+10FFFF */
        else if (c >= 0xf1 && c <= 0xf3) len = 4;
        else return i;                                       /* 80–C1, F5–FF */
        if (n - i < len) return i;
        if (p[i + 1] < lo || p[i + 1] > hi) return i;
        for (size_t k = 2; k < len; k++)
            if (p[i + k] < 0x80 || p[i + k] > 0xbf) return i;
        i += len;
    }
    return n;
}

long cal_utf8_chars(const char *s, size_t len)
{
    long n = 0;
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) n++;   /* count every non-continuation byte */
    return n;
}
