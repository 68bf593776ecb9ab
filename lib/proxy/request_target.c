/* caliper proxy — the request target a client sends, checked before it goes
 * anywhere near the upstream URL (see caliper/proxy.h). The proxy must only
 * ever reach its upstream: a target that is not a plain path ("@host:port/…",
 * "//host/…", "http://host/…", a backslash that some parsers read as a slash)
 * could otherwise become the authority of the URL curl connects to. The
 * upstream URL is then built with curl's URL API, part by part. */
#include "caliper/proxy.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "caliper/error.h"

static int is_hex(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int hexval(int c)
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* RFC 3986 pchar without pct-encoded: unreserved, sub-delims, ':' and '@'.
 * '@' and ':' are harmless inside a path once the authority is fixed. */
static int is_pchar(int c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
    return c && strchr("-._~!$&'()*+,;=:@", c) != NULL;
}

/* A byte for an error message: printable as is, otherwise as hex. */
static const char *show(int c, char buf[8])
{
    if (c > 0x20 && c < 0x7f) snprintf(buf, 8, "'%c'", c);
    else snprintf(buf, 8, "0x%02x", (unsigned)(unsigned char)c);
    return buf;
}

/* A path segment that is "." or ".." once %2e is decoded. */
static int dot_segment(const char *s, size_t n)
{
    int dots = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] == '.') { dots++; i++; }
        else if (s[i] == '%' && i + 2 < n && s[i + 1] == '2' && (s[i + 2] | 0x20) == 'e') { dots++; i += 3; }
        else return 0;
    }
    return dots == 1 || dots == 2;
}

int cal_proxy_target_check(const char *t, size_t *path_len, char *why, size_t why_len)
{
    char b[8];
    if (!t || !t[0]) return cal_why(why, why_len, CAL_EPROTO, "request target is empty");
    size_t n = strlen(t);
    if (n > CAL_PROXY_TARGET_MAX)
        return cal_why(why, why_len, CAL_EPROTO, "request target is longer than %d bytes", CAL_PROXY_TARGET_MAX);
    if (t[0] != '/')
        return cal_why(why, why_len, CAL_EPROTO,
                       "request target must be a path starting with '/' (origin form), not %s...",
                       show((unsigned char)t[0], b));
    if (t[1] == '/')
        return cal_why(why, why_len, CAL_EPROTO, "request target starts with \"//\" (an authority, not a path)");
    size_t i = 0, seg = 1;
    for (; t[i] && t[i] != '?'; i++) {
        int c = (unsigned char)t[i];
        if (c == '/') {
            if (dot_segment(t + seg, i - seg))
                return cal_why(why, why_len, CAL_EPROTO, "request target has a dot segment at byte %zu", seg);
            seg = i + 1;
            continue;
        }
        if (c == '%') {
            if (!is_hex((unsigned char)t[i + 1]) || !is_hex((unsigned char)t[i + 2]))
                return cal_why(why, why_len, CAL_EPROTO, "request target has a bad %%-escape at byte %zu", i);
            if (hexval(t[i + 1]) * 16 + hexval(t[i + 2]) == 0)
                return cal_why(why, why_len, CAL_EPROTO, "request target has %%00 at byte %zu", i);
            i += 2;
            continue;
        }
        if (!is_pchar(c))
            return cal_why(why, why_len, CAL_EPROTO, "request target path has %s at byte %zu", show(c, b), i);
    }
    if (dot_segment(t + seg, i - seg))
        return cal_why(why, why_len, CAL_EPROTO, "request target has a dot segment at byte %zu", seg);
    size_t plen = i;
    if (t[i] == '?') {
        /* the query goes to curl as its own part: any visible ASCII byte but
         * '#', with well-formed escapes (clients send "a[]=1" unencoded) */
        for (i++; t[i]; i++) {
            int c = (unsigned char)t[i];
            if (c == '%') {
                if (!is_hex((unsigned char)t[i + 1]) || !is_hex((unsigned char)t[i + 2]))
                    return cal_why(why, why_len, CAL_EPROTO, "request target has a bad %%-escape at byte %zu", i);
                i += 2;
                continue;
            }
            if (c <= 0x20 || c >= 0x7f || c == '#')
                return cal_why(why, why_len, CAL_EPROTO, "request target query has %s at byte %zu", show(c, b), i);
        }
    }
    if (path_len) *path_len = plen;
    return CAL_OK;
}

int cal_proxy_upstream_url(const char *upstream, const char *target, struct Curl_URL **curlu, char **url,
                           char *why, size_t why_len)
{
    if (curlu) *curlu = NULL;
    if (url) *url = NULL;
    size_t plen = 0;
    int rc = cal_proxy_target_check(target, &plen, why, why_len);
    if (rc != CAL_OK) return rc;
    CURLU *u = curl_url();
    if (!u) return CAL_ENOMEM;
    char *base = NULL, *path = NULL;
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, upstream ? upstream : "", 0);
    if (uc == CURLUE_OK) uc = curl_url_get(u, CURLUPART_PATH, &base, 0);
    if (uc != CURLUE_OK) {
        curl_url_cleanup(u);
        curl_free(base);
        return uc == CURLUE_OUT_OF_MEMORY ? CAL_ENOMEM
               : cal_why(why, why_len, CAL_EINVAL, "upstream \"%s\" is not a URL: %s",
                         upstream ? upstream : "", curl_url_strerror(uc));
    }
    /* the upstream's own path (without its trailing '/'), then the target's */
    size_t bl = strlen(base);
    while (bl > 0 && base[bl - 1] == '/') bl--;
    path = malloc(bl + plen + 1);
    if (!path) { curl_url_cleanup(u); curl_free(base); return CAL_ENOMEM; }
    memcpy(path, base, bl);
    memcpy(path + bl, target, plen);
    path[bl + plen] = '\0';
    curl_free(base);
    /* no CURLU_URLENCODE: the escapes the client sent are kept as sent */
    uc = curl_url_set(u, CURLUPART_PATH, path, 0);
    if (uc == CURLUE_OK) uc = curl_url_set(u, CURLUPART_QUERY, target[plen] == '?' ? target + plen + 1 : NULL, 0);
    if (uc == CURLUE_OK) uc = curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0);
    free(path);
    char *s = NULL;
    if (uc == CURLUE_OK && url) uc = curl_url_get(u, CURLUPART_URL, &s, 0);
    if (uc != CURLUE_OK) {
        curl_url_cleanup(u);
        return uc == CURLUE_OUT_OF_MEMORY ? CAL_ENOMEM
               : cal_why(why, why_len, CAL_EPROTO, "request target \"%.64s\": %s", target, curl_url_strerror(uc));
    }
    if (url) {
        *url = strdup(s);
        curl_free(s);
        if (!*url) { curl_url_cleanup(u); return CAL_ENOMEM; }
    }
    if (curlu) *curlu = u;
    else curl_url_cleanup(u);
    return CAL_OK;
}
