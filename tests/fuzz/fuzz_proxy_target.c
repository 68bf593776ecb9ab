/* Fuzz target: the proxy's request-target check and the upstream URL built
 * from it. Whatever the client sends, a target the check accepts must give
 * a URL on the upstream's scheme, host and port, with no user part, under
 * the upstream's path; a target it refuses must build nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "caliper/error.h"
#include "caliper/proxy.h"

static int part_is(CURLU *u, CURLUPart part, const char *want)
{
    char *v = NULL;
    CURLUcode uc = curl_url_get(u, part, &v, 0);
    int same = want ? (uc == CURLUE_OK && v && !strcmp(v, want)) : (uc != CURLUE_OK || !v);
    curl_free(v);
    return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > CAL_PROXY_TARGET_MAX + 16) return 0;
    char *t = malloc(size + 1);
    if (!t) return 0;
    memcpy(t, data, size);
    t[size] = '\0';
    char why[160];
    size_t plen = 0;
    int ok = cal_proxy_target_check(t, &plen, why, sizeof why) == CAL_OK;
    CURLU *u = NULL;
    char *url = NULL;
    int rc = cal_proxy_upstream_url("http://127.0.0.1:8000/base/", t, &u, &url, why, sizeof why);
    if (!ok) {
        if (rc != CAL_EPROTO || u || url) abort();
    } else if (rc == CAL_OK) {
        if (t[0] != '/' || plen > strlen(t)) abort();
        if (!part_is(u, CURLUPART_SCHEME, "http") || !part_is(u, CURLUPART_HOST, "127.0.0.1") ||
            !part_is(u, CURLUPART_PORT, "8000") || !part_is(u, CURLUPART_USER, NULL) ||
            !part_is(u, CURLUPART_PASSWORD, NULL) || !part_is(u, CURLUPART_FRAGMENT, NULL))
            abort();
        char *path = NULL;
        if (curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK || strncmp(path, "/base/", 6)) abort();
        curl_free(path);
        /* the text curl would parse again names the same authority */
        CURLU *back = curl_url();
        if (back && curl_url_set(back, CURLUPART_URL, url, 0) == CURLUE_OK &&
            (!part_is(back, CURLUPART_HOST, "127.0.0.1") || !part_is(back, CURLUPART_PORT, "8000") ||
             !part_is(back, CURLUPART_USER, NULL)))
            abort();
        curl_url_cleanup(back);
    } else if (rc != CAL_ENOMEM && rc != CAL_EPROTO) {
        abort();
    }
    curl_url_cleanup(u);
    free(url);
    free(t);
    return 0;
}
