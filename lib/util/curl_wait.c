/* cal_curl_perform (curl_wait.h): the transfer on a multi handle, polled
 * with a short timeout so the stop flag is read while the peer is silent. */
#include "lib/util/curl_wait.h"

CURLcode cal_curl_perform(CURLM *m, CURL *c, volatile int *stop, const atomic_int *astop)
{
    CURLM *own = NULL;
    if (!m && !(m = own = curl_multi_init())) return CURLE_OUT_OF_MEMORY;
    if (curl_multi_add_handle(m, c) != CURLM_OK) {
        if (own) curl_multi_cleanup(own);
        return CURLE_FAILED_INIT;
    }
    CURLcode res = CURLE_OK;
    for (int done = 0; !done;) {
        if ((stop && *stop) || (astop && atomic_load_explicit(astop, memory_order_relaxed))) {
            res = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
        int running = 0;
        if (curl_multi_perform(m, &running) != CURLM_OK) { res = CURLE_FAILED_INIT; break; }
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)))
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == c) {
                res = msg->data.result;
                done = 1;
            }
        if (!done && curl_multi_poll(m, NULL, 0, CAL_CURL_WAIT_MS, NULL) != CURLM_OK) {
            res = CURLE_FAILED_INIT;
            break;
        }
    }
    curl_multi_remove_handle(m, c);
    if (own) curl_multi_cleanup(own);
    return res;
}
