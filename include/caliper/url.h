/* caliper — what of a URL may be stored or printed. A target URL may carry
 * credentials (http://user:password@host/): they reach the server, never the
 * store, a report or a progress line. Parsing is libcurl's URL API (CURLU),
 * the same parser that connects, so both read the URL alike. */
#ifndef CALIPER_URL_H
#define CALIPER_URL_H
#include <stddef.h>

/* The text every credential-bearing URL that cannot be parsed becomes. */
#define CAL_URL_UNPARSABLE "(a URL caliper cannot parse)"

/* Copy url into out[out_len] without its user name, password and login
 * options ("http://u:p@h:8080/v1" → "http://h:8080/v1"). A URL that carries
 * none is copied unchanged, byte for byte. Returns CAL_OK; CAL_EINVAL for a
 * NULL url or out, or out_len 0; CAL_EPROTO when libcurl cannot parse url,
 * CAL_ENOMEM, CAL_ETOOBIG when the result does not fit: in each of those
 * out holds CAL_URL_UNPARSABLE (truncated to fit), never any of the input,
 * so out is always safe to print. Thread-safe; allocates only inside
 * libcurl, and frees that before returning. */
int cal_url_redact(const char *url, char *out, size_t out_len);

/* 1 when url parses (any scheme) and carries a user name, a password or
 * login options; 0 when it parses without any; -1 when it does not parse or
 * memory ran out. */
int cal_url_has_credentials(const char *url);

#endif
