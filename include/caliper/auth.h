/* caliper — the Authorization header, one bound for every HTTP call the
 * library makes (probe, target checks, the server's /tokenize), so a key
 * that one of them accepts is sent whole by all of them; a longer key is an
 * error before any request, never a silently cut header and a 401. */
#ifndef CALIPER_AUTH_H
#define CALIPER_AUTH_H
#include <stddef.h>

#define CAL_API_KEY_MAX 8000   /* bytes of API key, at most */
/* "Authorization: Bearer " + key + NUL */
#define CAL_AUTH_HEADER_MAX (CAL_API_KEY_MAX + sizeof "Authorization: Bearer ")

/* "Authorization: Bearer KEY" into buf[n]. CAL_OK; CAL_ETOOBIG when the key
 * is longer than CAL_API_KEY_MAX bytes or does not fit n; CAL_EINVAL for a
 * NULL argument or a key holding a control character (CR or LF would end
 * the header and start another). buf is "" on failure. */
int cal_auth_header(const char *api_key, char *buf, size_t n);

#endif
