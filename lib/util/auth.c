/* The Authorization header under one bound (auth.h). */
#include <stdio.h>
#include <string.h>
#include "caliper/auth.h"
#include "caliper/error.h"

int cal_auth_header(const char *api_key, char *buf, size_t n)
{
    if (buf && n) buf[0] = '\0';
    if (!api_key || !buf) return CAL_EINVAL;
    size_t k = strlen(api_key);
    if (k > CAL_API_KEY_MAX) return CAL_ETOOBIG;
    for (size_t i = 0; i < k; i++)
        if ((unsigned char)api_key[i] < 0x20 || api_key[i] == 0x7f) return CAL_EINVAL;
    int w = snprintf(buf, n, "Authorization: Bearer %s", api_key);
    if (w < 0 || (size_t)w >= n) {
        if (n) buf[0] = '\0';
        return CAL_ETOOBIG;
    }
    return CAL_OK;
}
