/* cal_global_init: the library's process-wide setup, once (global.h). */
#include <curl/curl.h>
#include <pthread.h>
#include "caliper/error.h"
#include "caliper/global.h"
#include "lib/util/c_locale.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc = CAL_EINTERNAL;

static void init(void)
{
    cal_locale_pop(cal_locale_push());   /* make the C locale object now */
    init_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? CAL_OK : CAL_EINTERNAL;
}

int cal_global_init(void)
{
    pthread_once(&init_once, init);
    return init_rc;
}
