/* One libcurl transfer that a stop flag can end: curl_easy_perform waits
 * out its timeouts, and its progress callback may run only once a second
 * while nothing arrives, so a Ctrl-C during a call to a server that never
 * answers waited for the whole deadline (67 s). */
#ifndef CALIPER_UTIL_CURL_WAIT_H
#define CALIPER_UTIL_CURL_WAIT_H
#include <curl/curl.h>
#include <stdatomic.h>

/* How often the flag is read while a transfer waits. */
#define CAL_CURL_WAIT_MS 100

/* Runs easy handle c to its end on multi m (NULL: a multi of its own for
 * this one call; with one of the caller's, no other transfer may run on it
 * meanwhile), as curl_easy_perform would, its own options (CURLOPT_TIMEOUT_MS,
 * ...) applying. *stop (a Ctrl-C flag) and *astop (a flag another thread
 * sets), NULL for none, are read at least every CAL_CURL_WAIT_MS: either
 * non-zero ends the transfer with CURLE_ABORTED_BY_CALLBACK. */
CURLcode cal_curl_perform(CURLM *m, CURL *c, volatile int *stop, const atomic_int *astop);

#endif
