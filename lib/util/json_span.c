/* Element spans of a JSON array without decoding it (json_span.h). */
#include "lib/util/json_span.h"
#include <string.h>

static int ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_ws(const char *b, size_t n, size_t i)
{
    while (i < n && ws(b[i])) i++;
    return i;
}

/* Past the value starting at b[i]: a string, an object or array by its
 * brackets, or a scalar up to the next ',', ']', '}' or space. (size_t)-1
 * when it never closes. */
static size_t skip_value(const char *b, size_t n, size_t i)
{
    size_t depth = 0;
    for (; i < n; i++) {
        char c = b[i];
        if (c == '"') {
            for (i++; i < n && b[i] != '"'; i++)
                if (b[i] == '\\') i++;
            if (i >= n) return (size_t)-1;
            if (!depth) return i + 1;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (!depth) return i;             /* a scalar's end */
            if (!--depth) return i + 1;
        } else if (!depth && (c == ',' || ws(c))) {
            return i;
        }
    }
    return depth ? (size_t)-1 : n;
}

int cal_jspan_open_array(const char *b, size_t n, size_t *i)
{
    size_t k = skip_ws(b, n, *i);
    if (k >= n || b[k] != '[') return -1;
    *i = k + 1;
    return 0;
}

int cal_jspan_next(const char *b, size_t n, size_t *i, size_t *start, size_t *len)
{
    size_t k = skip_ws(b, n, *i);
    if (k >= n) return -1;
    if (b[k] == ']') {
        size_t j = k;   /* "[1,]" is not JSON */
        while (j && ws(b[j - 1])) j--;
        if (j && b[j - 1] == ',') return -1;
        *i = k + 1;
        return 0;
    }
    size_t e = skip_value(b, n, k);
    if (e == (size_t)-1 || e == k) return -1;
    *start = k;
    *len = e - k;
    k = skip_ws(b, n, e);
    if (k < n && b[k] == ',') k++;
    else if (k >= n || b[k] != ']') return -1;
    *i = k;
    return 1;
}

long cal_jspan_count(const char *b, size_t n, size_t i, size_t stop)
{
    if (cal_jspan_open_array(b, n, &i)) return -1;
    size_t s, l;
    long c = 0;
    int r;
    while ((r = cal_jspan_next(b, n, &i, &s, &l)) == 1)
        if ((size_t)++c > stop) break;
    return r < 0 ? -1 : c;
}

int cal_jspan_member(const char *b, size_t n, const char *key, size_t *start, size_t *len)
{
    size_t i = skip_ws(b, n, 0), kl = strlen(key);
    if (i >= n || b[i] != '{') return -1;
    i = skip_ws(b, n, i + 1);
    if (i < n && b[i] == '}') return 0;
    for (;;) {
        if (i >= n || b[i] != '"') return -1;
        size_t k0 = i + 1, ke = skip_value(b, n, i);
        if (ke == (size_t)-1) return -1;
        i = skip_ws(b, n, ke);
        if (i >= n || b[i] != ':') return -1;
        i = skip_ws(b, n, i + 1);
        size_t ve = skip_value(b, n, i);
        if (ve == (size_t)-1 || ve == i) return -1;
        if (ke - 1 - k0 == kl && !memcmp(b + k0, key, kl)) {
            *start = i;
            *len = ve - i;
            return 1;
        }
        i = skip_ws(b, n, ve);
        if (i < n && b[i] == ',') i = skip_ws(b, n, i + 1);
        else if (i < n && b[i] == '}') return 0;
        else return -1;
    }
}

size_t cal_jspan_line(const char *b, size_t at)
{
    size_t line = 1;
    for (const char *p = b; (p = memchr(p, '\n', (size_t)(b + at - p))) != NULL; p++) line++;
    return line;
}
