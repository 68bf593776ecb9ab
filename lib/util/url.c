/* Credentials out of URLs, through libcurl's URL API (CURLU): the parser
 * that will connect decides what the user part is, so a URL curl would log
 * in with is one this file redacts. */
#include <curl/curl.h>
#include <stdio.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/url.h"

/* Parse url into a new handle; NULL on failure (*rc says which). */
static CURLU *parse(const char *url, int *rc)
{
    CURLU *h = curl_url();
    if (!h) { *rc = CAL_ENOMEM; return NULL; }
    CURLUcode uc = curl_url_set(h, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME);
    if (uc != CURLUE_OK) {
        *rc = uc == CURLUE_OUT_OF_MEMORY ? CAL_ENOMEM : CAL_EPROTO;
        curl_url_cleanup(h);
        return NULL;
    }
    *rc = CAL_OK;
    return h;
}

/* 1 if part is present, 0 if absent, CAL_ENOMEM if curl ran out. */
static int has_part(CURLU *h, CURLUPart part)
{
    char *v = NULL;
    CURLUcode uc = curl_url_get(h, part, &v, 0);
    curl_free(v);
    if (uc == CURLUE_OK) return 1;
    return uc == CURLUE_OUT_OF_MEMORY ? CAL_ENOMEM : 0;
}

static int credentials(CURLU *h)
{
    static const CURLUPart parts[] = {CURLUPART_USER, CURLUPART_PASSWORD, CURLUPART_OPTIONS};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        int r = has_part(h, parts[i]);
        if (r) return r;
    }
    return 0;
}

int cal_url_has_credentials(const char *url)
{
    if (!url) return -1;
    int rc;
    CURLU *h = parse(url, &rc);
    if (!h) return -1;
    int r = credentials(h);
    curl_url_cleanup(h);
    return r < 0 ? -1 : r;
}

int cal_url_redact(const char *url, char *out, size_t out_len)
{
    if (!out || !out_len) return CAL_EINVAL;
    if (!url) {
        snprintf(out, out_len, "%s", CAL_URL_UNPARSABLE);
        return CAL_EINVAL;
    }
    int rc;
    CURLU *h = parse(url, &rc);
    if (h) {
        rc = credentials(h);
        if (rc == 0) {   /* nothing to remove: the input as given */
            rc = strlen(url) < out_len ? CAL_OK : CAL_ETOOBIG;
            if (rc == CAL_OK) memcpy(out, url, strlen(url) + 1);
        } else if (rc == 1) {
            char *clean = NULL;
            if (curl_url_set(h, CURLUPART_USER, NULL, 0) != CURLUE_OK ||
                curl_url_set(h, CURLUPART_PASSWORD, NULL, 0) != CURLUE_OK ||
                curl_url_set(h, CURLUPART_OPTIONS, NULL, 0) != CURLUE_OK)
                rc = CAL_ENOMEM;
            else if (curl_url_get(h, CURLUPART_URL, &clean, 0) != CURLUE_OK)
                rc = CAL_ENOMEM;
            else if (strlen(clean) >= out_len)
                rc = CAL_ETOOBIG;
            else {
                memcpy(out, clean, strlen(clean) + 1);
                rc = CAL_OK;
            }
            curl_free(clean);
        }
        curl_url_cleanup(h);
    }
    if (rc != CAL_OK) snprintf(out, out_len, "%s", CAL_URL_UNPARSABLE);
    return rc;
}
