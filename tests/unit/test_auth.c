/* One bound on the API key for every HTTP call of the library: a key of
 * CAL_API_KEY_MAX bytes reaches the server whole from the target check
 * (/v1/models), the server's tokenizer (/tokenize) and the probe; one byte
 * more is CAL_ETOOBIG from each before any request, never a cut header that
 * the server answers with 401. A loopback server checks the header. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <microhttpd.h>
#include "caliper/auth.h"
#include "caliper/error.h"
#include "caliper/global.h"
#include "caliper/probe.h"
#include "caliper/protocol.h"
#include "caliper/workload.h"

static char g_want[CAL_AUTH_HEADER_MAX + 16];   /* "Bearer KEY" the server accepts */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_seen_len, g_ok, g_denied;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned st, const char *body)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body,
                                                             MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, st, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    (void)cls; (void)version; (void)upload;
    static int started;
    if (!*con_cls) { *con_cls = &started; return MHD_YES; }
    if (*upload_size) { *upload_size = 0; return MHD_YES; }
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    int ok = a && !strcmp(a, g_want);
    pthread_mutex_lock(&g_mu);
    g_seen_len = a ? (int)strlen(a) : -1;
    if (ok) g_ok++; else g_denied++;
    pthread_mutex_unlock(&g_mu);
    if (!ok) return reply(c, 401, "{\"error\":\"bad key\"}");
    if (!strcmp(method, "GET") && !strcmp(url, "/v1/models"))
        return reply(c, 200, "{\"data\":[{\"id\":\"m1\"}]}");
    if (!strcmp(method, "POST") && !strcmp(url, "/tokenize"))
        return reply(c, 200, "{\"count\":5}");
    return reply(c, 404, "{}");
}

static struct MHD_Daemon *g_d;
static char g_url[64];

static int up(void **st)
{
    (void)st;
    if (cal_global_init()) return -1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    g_d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0,
                           NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                           MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 << 10), MHD_OPTION_END);
    if (!g_d) return -1;
    snprintf(g_url, sizeof g_url, "http://127.0.0.1:%d",
             MHD_get_daemon_info(g_d, MHD_DAEMON_INFO_BIND_PORT)->port);
    return 0;
}

static int down(void **st)
{
    (void)st;
    MHD_stop_daemon(g_d);
    return 0;
}

static char *key_of(size_t n)
{
    char *k = malloc(n + 1);
    for (size_t i = 0; i < n; i++) k[i] = (char)('a' + i % 26);
    k[n] = '\0';
    snprintf(g_want, sizeof g_want, "Bearer %s", k);
    return k;
}

static void test_header(void **st)
{
    (void)st;
    char buf[CAL_AUTH_HEADER_MAX];
    char *k = key_of(CAL_API_KEY_MAX);
    assert_int_equal(cal_auth_header(k, buf, sizeof buf), CAL_OK);
    assert_int_equal(strlen(buf), strlen("Authorization: Bearer ") + CAL_API_KEY_MAX);
    assert_memory_equal(buf + strlen("Authorization: Bearer "), k, CAL_API_KEY_MAX);
    assert_int_equal(cal_auth_header(k, buf, 100), CAL_ETOOBIG);   /* does not fit n */
    assert_string_equal(buf, "");
    free(k);
    k = key_of(CAL_API_KEY_MAX + 1);
    assert_int_equal(cal_auth_header(k, buf, sizeof buf), CAL_ETOOBIG);
    free(k);
    assert_int_equal(cal_auth_header("sk-1\r\nX-Injected: 1", buf, sizeof buf), CAL_EINVAL);
    assert_int_equal(cal_auth_header("sk-1\n", buf, sizeof buf), CAL_EINVAL);
    assert_int_equal(cal_auth_header("sk-ok", buf, sizeof buf), CAL_OK);
    assert_string_equal(buf, "Authorization: Bearer sk-ok");
}

/* The longest key reaches /v1/models and /tokenize whole (the 512-byte
 * buffers it replaced cut it, and /tokenize answered 401). */
static void test_longest_key_is_sent_whole(void **st)
{
    (void)st;
    char *k = key_of(CAL_API_KEY_MAX);
    char id[64];
    g_ok = g_denied = 0;
    assert_int_equal(cal_target_models(g_url, k, 0, id, sizeof id, NULL), CAL_OK);
    assert_string_equal(id, "m1");
    assert_int_equal(g_seen_len, (int)strlen("Bearer ") + CAL_API_KEY_MAX);
    cal_http_tokenizer *t = NULL;
    assert_int_equal(cal_http_tokenizer_open(g_url, "m1", k, 0, &t), CAL_OK);
    int n = 0;
    assert_int_equal(cal_http_tokenizer_count(t, "hello", &n), CAL_OK);
    assert_int_equal(n, 5);
    cal_http_tokenizer_close(&t);
    assert_int_equal(g_seen_len, (int)strlen("Bearer ") + CAL_API_KEY_MAX);
    assert_int_equal(g_ok, 2);
    assert_int_equal(g_denied, 0);
    cal_probe_config pc = {.base_url = g_url, .api = CAL_API_COMPLETIONS, .api_key = k};
    cal_probe *p = NULL;
    assert_int_equal(cal_probe_open(&pc, &p), CAL_OK);
    cal_probe_close(&p);
    free(k);
}

/* One byte over: a named error from each, and no request is made. */
static void test_longer_key_is_refused(void **st)
{
    (void)st;
    char *k = key_of(CAL_API_KEY_MAX + 1);
    g_ok = g_denied = 0;
    char id[64] = "x";
    assert_int_equal(cal_target_models(g_url, k, 0, id, sizeof id, NULL), CAL_ETOOBIG);
    assert_string_equal(id, "");
    cal_http_tokenizer *t = NULL;
    assert_int_equal(cal_http_tokenizer_open(g_url, "m1", k, 0, &t), CAL_ETOOBIG);
    assert_null(t);
    cal_probe_config pc = {.base_url = g_url, .api = CAL_API_COMPLETIONS, .api_key = k};
    cal_probe *p = NULL;
    assert_int_equal(cal_probe_open(&pc, &p), CAL_ETOOBIG);
    assert_null(p);
    assert_int_equal(g_ok + g_denied, 0);
    free(k);
    /* a model name that is not UTF-8 cannot go out in a JSON body: the
     * caller's input is named as such, not reported as out of memory */
    cal_probe_config pm = {.base_url = g_url, .api = CAL_API_COMPLETIONS, .model = "m\xff"};
    assert_int_equal(cal_probe_open(&pm, &p), CAL_EINVAL);
    assert_null(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_longest_key_is_sent_whole),
        cmocka_unit_test(test_longer_key_is_refused),
    };
    return cmocka_run_group_tests(tests, up, down);
}
