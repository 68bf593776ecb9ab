/* Unit tests: the prefix composition of chat and completions bodies, the
 * turn record as JSON, and the proxy itself over loopback in front of a
 * small upstream that drips SSE events 30 ms apart: the client must get the
 * bytes unchanged, and the turn's TTFT, decode time and tokens must match
 * the drip; an unreachable upstream answers 502. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>
#include <microhttpd.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "caliper/global.h"
#include "caliper/proxy.h"

#define NEAR(got, want, tol) assert_true(fabs((got) - (want)) <= (tol))

static const char *CHAT =
    "{\"model\":\"m\",\"stream\":true,"
    "\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},"
    "{\"role\":\"user\",\"content\":\"h\xc3\xa9llo\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
    "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"},"
    "{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"Be kind.\"}]},"
    "{\"role\":\"user\",\"content\":\"and now?\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}]}";

static void test_prefix_chat(void **state)
{
    (void)state;
    cal_prefix p;
    char why[128];
    assert_int_equal(cal_prefix_parse(CHAT, strlen(CHAT), &p, why, sizeof why), CAL_OK);
    assert_true(p.chat);
    assert_true(p.stream);
    assert_int_equal(p.n_messages, 6);
    assert_int_equal(p.n_tools, 1);
    assert_string_equal(p.new_role, "user");
    /* system + developer, joined by a newline */
    assert_string_equal(p.text[CAL_PART_SYSTEM], "You are terse.\nBe kind.");
    assert_int_equal(p.part[CAL_PART_SYSTEM].chars, 23);
    /* history: "héllo" (5 code points, 6 bytes), the tool call as JSON, "42" */
    const char *calls = "[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]";
    char want[256];
    snprintf(want, sizeof want, "h\xc3\xa9llo\n%s\n42", calls);
    assert_string_equal(p.text[CAL_PART_HISTORY], want);
    assert_int_equal(p.part[CAL_PART_HISTORY].chars, (long)strlen(want) - 1);
    assert_string_equal(p.text[CAL_PART_TOOLS],
                        "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}]");
    assert_string_equal(p.text[CAL_PART_NEW], "and now?");
    /* estimates: ceil(chars / 4), marked */
    assert_int_equal(p.part[CAL_PART_NEW].tokens, 2);
    assert_true(p.part[CAL_PART_NEW].estimated);
    assert_int_equal(p.part[CAL_PART_SYSTEM].tokens, 6);
    cal_prefix_free(&p);
    cal_prefix_free(&p);   /* idempotent */
}

static void test_prefix_completions_and_errors(void **state)
{
    (void)state;
    cal_prefix p;
    char why[128];
    const char *c1 = "{\"prompt\":\"abcdefghi\"}";
    assert_int_equal(cal_prefix_parse(c1, strlen(c1), &p, why, sizeof why), CAL_OK);
    assert_false(p.chat);
    assert_false(p.stream);
    assert_int_equal(p.part[CAL_PART_NEW].chars, 9);
    assert_int_equal(p.part[CAL_PART_NEW].tokens, 3);
    assert_int_equal(p.part[CAL_PART_SYSTEM].chars, 0);
    assert_false(p.part[CAL_PART_SYSTEM].estimated);
    cal_prefix_free(&p);
    const char *c2 = "{\"prompt\":[\"ab\",\"cd\"]}";
    assert_int_equal(cal_prefix_parse(c2, strlen(c2), &p, why, sizeof why), CAL_OK);
    assert_string_equal(p.text[CAL_PART_NEW], "ab\ncd");
    cal_prefix_free(&p);
    static const struct { const char *body, *needle; } BAD[] = {
        {"[1,2]", "not a JSON object"},
        {"{\"messages\":{}}", "messages: not an array"},
        {"{\"messages\":[1]}", "messages[0]"},
        {"{\"prompt\":[\"a\",3]}", "prompt[1]"},
        {"{\"prompt\":3}", "prompt"},
        {"{\"model\":\"x\"}", "neither"},
        {"{\"messages\":[", "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        assert_int_equal(cal_prefix_parse(BAD[i].body, strlen(BAD[i].body), &p, why, sizeof why), CAL_EPROTO);
        assert_non_null(strstr(why, BAD[i].needle));
        for (int k = 0; k < CAL_PART_N; k++) assert_null(p.text[k]);
    }
    assert_int_equal(cal_utf8_chars("\xe6\x97\xa5\xe6\x9c\xac", 6), 2);
}

static void test_turn_json(void **state)
{
    (void)state;
    cal_proxy_turn t;
    memset(&t, 0, sizeof t);
    t.index = 3;
    snprintf(t.path, sizeof t.path, "/v1/chat/completions");
    t.status = 200;
    t.prefix.part[CAL_PART_SYSTEM] = (cal_prefix_part){6036, 1509, 0};
    t.prefix.part[CAL_PART_TOOLS] = (cal_prefix_part){26412, 6603, 1};
    t.prefix_tokens = 8112;
    t.prefix_estimated = 1;
    t.ttft_s = 6.084;
    t.decode_s = 10.003;
    t.turn_s = 16.087;
    t.output_tokens = 377;
    t.output_from_usage = 1;
    t.usage_prompt_tokens = -1;
    t.decode_tok_s = 377 / 10.003;
    t.ttft_share = 6.084 / 16.087;
    json_t *o = cal_proxy_turn_json(&t);
    assert_non_null(o);
    NEAR(json_real_value(json_object_get(o, "decode_tok_s")), 37.69, 0.005);  /* SPEC 1.3 */
    NEAR(json_real_value(json_object_get(o, "ttft_share")), 0.378, 0.001);
    json_t *tools = json_object_get(json_object_get(o, "prefix"), "tools");
    assert_int_equal(json_integer_value(json_object_get(tools, "tokens")), 6603);
    assert_true(json_is_true(json_object_get(tools, "estimated")));
    assert_true(json_is_null(json_object_get(o, "usage_prompt_tokens")));
    assert_string_equal(json_string_value(json_object_get(o, "output_tokens_from")), "usage");
    json_decref(o);
}

/* ---- a live proxy in front of a dripping upstream ----------------------- */

#define DRIP_MS 30
static const char *const EVENTS[] = {
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"one\"}}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" two\"}}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" three\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":3,\"total_tokens\":43}}\n\n",
    "data: [DONE]\n\n",
};
#define N_EVENTS (sizeof EVENTS / sizeof EVENTS[0])

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static ssize_t drip(void *cls, uint64_t pos, char *buf, size_t max)
{
    size_t *i = cls;
    if (*i >= N_EVENTS) return MHD_CONTENT_READER_END_OF_STREAM;
    if (*i >= 1) sleep_ms(DRIP_MS);   /* the role chunk comes at once, text after */
    size_t n = strlen(EVENTS[*i]);
    if (n > max) return MHD_CONTENT_READER_END_WITH_ERROR;
    memcpy(buf, EVENTS[*i], n);
    (*i)++;
    return (ssize_t)n;
}

static enum MHD_Result upstream(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                const char *version, const char *up, size_t *up_size, void **con_cls)
{
    if (!*con_cls) { *con_cls = (void *)1; return MHD_YES; }
    if (*up_size) { *up_size = 0; return MHD_YES; }
    struct MHD_Response *r;
    unsigned status = 200;
    if (!strcmp(url, "/v1/chat/completions")) {
        size_t *i = calloc(1, sizeof *i);
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, drip, i, free);
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
    } else if (!strcmp(url, "/v1/models")) {
        const char *b = "{\"data\":[{\"id\":\"m\"}]}";
        const char *q = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "x");
        char body[128];
        snprintf(body, sizeof body, "{\"q\":\"%s\",\"body\":%s}", q ? q : "", b);
        r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
        MHD_add_response_header(r, "Content-Type", "application/json");
    } else {
        status = 404;
        r = MHD_create_response_from_buffer(9, (void *)"not found", MHD_RESPMEM_PERSISTENT);
    }
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- the request target: only ever a path on the upstream --------------- */

static void test_target_check(void **state)
{
    (void)state;
    static const char *const good[] = {
        "/", "/v1/models", "/v1/models?x=a%20b&y", "/v1/a@b:c", "/v1/%40x", "/v1/%2F",
        "/a/b.c/..d/.e", "/v1?q=http://x/@y", "/v1?a[]=1&b={2}", "/v1/chat/completions?",
    };
    static const char *const bad[] = {
        "", "@127.0.0.1:9/v1/models", "//127.0.0.1:9/v1/models", "///x",
        "http://127.0.0.1:9/v1/models", "HTTP://x/", "https://x", "*", "v1/models",
        "%40127.0.0.1:9/v1/models", "/v1\\models", "/\\127.0.0.1:9/x", "\\\\x/y",
        "/v1/models\r\nHost: x", "/v1\n", "/v1\r", "/v1 x", "/v1\tx", "/v1/%4", "/v1/%zz", "/v1/%",
        "/v1/%00", "/v1/../x", "/..", "/v1/./x", "/v1/%2e%2E/x", "/%2e", "/v1#frag", "/v1?x#y",
        "/v1?a\tb", "/v1?a b", "/v1?%g1", "/caf\xc3\xa9", "/v1?\x7f", "/v1/\"x\"", "/v1/<x>",
    };
    char why[160];
    size_t pl = 99;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int rc = cal_proxy_target_check(good[i], &pl, why, sizeof why);
        if (rc != CAL_OK) fail_msg("\"%s\" refused: %s", good[i], why);
        const char *q = strchr(good[i], '?');
        assert_int_equal(pl, q ? (size_t)(q - good[i]) : strlen(good[i]));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        if (cal_proxy_target_check(bad[i], &pl, why, sizeof why) != CAL_EPROTO)
            fail_msg("\"%s\" accepted", bad[i]);
        assert_non_null(strstr(why, "request target"));
    }
    /* the message says where */
    cal_proxy_target_check("@127.0.0.1:9/v1", NULL, why, sizeof why);
    assert_non_null(strstr(why, "'@'"));
    cal_proxy_target_check("/v1\r\n", NULL, why, sizeof why);
    assert_non_null(strstr(why, "0x0d at byte 3"));
    cal_proxy_target_check("/a\\b", NULL, why, sizeof why);
    assert_non_null(strstr(why, "'\\' at byte 2"));
    /* a target over the cap */
    char *big = malloc(CAL_PROXY_TARGET_MAX + 2);
    memset(big, 'a', CAL_PROXY_TARGET_MAX + 1);
    big[0] = '/';
    big[CAL_PROXY_TARGET_MAX + 1] = '\0';
    assert_int_equal(cal_proxy_target_check(big, NULL, why, sizeof why), CAL_EPROTO);
    big[CAL_PROXY_TARGET_MAX] = '\0';
    assert_int_equal(cal_proxy_target_check(big, NULL, why, sizeof why), CAL_OK);
    free(big);
}

/* The host and port of a URL as curl itself parses it. */
static void authority(const char *url, char *host, size_t hn, char *port, size_t pn)
{
    CURLU *u = curl_url();
    assert_non_null(u);
    assert_int_equal(curl_url_set(u, CURLUPART_URL, url, 0), CURLUE_OK);
    char *h = NULL, *p = NULL;
    assert_int_equal(curl_url_get(u, CURLUPART_HOST, &h, 0), CURLUE_OK);
    assert_int_equal(curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT), CURLUE_OK);
    snprintf(host, hn, "%s", h);
    snprintf(port, pn, "%s", p);
    curl_free(h);
    curl_free(p);
    curl_url_cleanup(u);
}

static void test_upstream_url(void **state)
{
    (void)state;
    struct { const char *up, *target, *want; } ok[] = {
        {"http://127.0.0.1:8000", "/v1/models", "http://127.0.0.1:8000/v1/models"},
        {"http://127.0.0.1:8000/", "/v1/models?x=a%20b&y", "http://127.0.0.1:8000/v1/models?x=a%20b&y"},
        {"http://127.0.0.1:8000", "/v1/%40x", "http://127.0.0.1:8000/v1/%40x"},
        {"http://127.0.0.1:8000", "/v1/a@127.0.0.2:9/x", "http://127.0.0.1:8000/v1/a@127.0.0.2:9/x"},
        {"http://127.0.0.1:8000", "/v1?u=http://127.0.0.2:9/@x", "http://127.0.0.1:8000/v1?u=http://127.0.0.2:9/@x"},
        {"https://user:pw@engine.local:8443/base/", "/v1/chat/completions",
         "https://user:pw@engine.local:8443/base/v1/chat/completions"},
    };
    char why[160], host[128], port[16];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char *url = NULL;
        CURLU *cu = NULL;
        int rc = cal_proxy_upstream_url(ok[i].up, ok[i].target, &cu, &url, why, sizeof why);
        if (rc != CAL_OK) fail_msg("%s + %s: %s", ok[i].up, ok[i].target, why);
        assert_string_equal(url, ok[i].want);
        /* the handle curl is given connects to the upstream, whatever the target */
        char *h = NULL;
        assert_int_equal(curl_url_get(cu, CURLUPART_HOST, &h, 0), CURLUE_OK);
        char uh[128], up[16];
        authority(ok[i].up, uh, sizeof uh, up, sizeof up);
        assert_string_equal(h, uh);
        authority(url, host, sizeof host, port, sizeof port);
        assert_string_equal(host, uh);
        assert_string_equal(port, up);
        curl_free(h);
        curl_url_cleanup(cu);
        free(url);
    }
    /* the attack: the target would have become the userinfo of the URL */
    static const char *const attacks[] = {"@127.0.0.2:9/v1/models", "//127.0.0.2:9/v1/models",
                                          "http://127.0.0.2:9/v1/models", ":9@127.0.0.2/v1", "/\\127.0.0.2/v1"};
    for (size_t i = 0; i < sizeof attacks / sizeof attacks[0]; i++) {
        char *url = (char *)1;
        CURLU *cu = (CURLU *)1;
        assert_int_equal(cal_proxy_upstream_url("http://127.0.0.1:8000", attacks[i], &cu, &url, why, sizeof why),
                         CAL_EPROTO);
        assert_null(url);
        assert_null(cu);
    }
    char *url = NULL;
    assert_int_equal(cal_proxy_upstream_url("not a url", "/v1", NULL, &url, why, sizeof why), CAL_EINVAL);
    assert_null(url);
    assert_non_null(strstr(why, "not a URL"));
}

/* Send one raw request line to 127.0.0.1:port; the status code answered. */
static int raw_status(int port, const char *target)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) { if (fd >= 0) close(fd); return -1; }
    char req[512], rsp[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", target);
    if (write(fd, req, (size_t)n) != n) { close(fd); return -1; }
    size_t got = 0;
    ssize_t k;
    while (got < sizeof rsp - 1 && (k = read(fd, rsp + got, sizeof rsp - 1 - got)) > 0) got += (size_t)k;
    rsp[got] = '\0';
    close(fd);
    int st = -1;
    return sscanf(rsp, "HTTP/1.%*d %d", &st) == 1 ? st : -1;
}

/* Turns arrive on a proxy thread: the test reads them under a lock. */
typedef struct got { pthread_mutex_t mu; int n; cal_proxy_turn t; } got;
static void on_turn(void *ud, const cal_proxy_turn *t)
{
    got *g = ud;
    pthread_mutex_lock(&g->mu);
    g->n++;
    g->t = *t;
    pthread_mutex_unlock(&g->mu);
}
static int wait_turns(got *g, int n, cal_proxy_turn *out)
{
    int have = 0;
    for (int i = 0; i < 300; i++) {
        pthread_mutex_lock(&g->mu);
        have = g->n;
        if (have >= n && out) *out = g->t;
        pthread_mutex_unlock(&g->mu);
        if (have >= n) break;
        sleep_ms(10);
    }
    return have;
}

static size_t to_buf(char *p, size_t sz, size_t nm, void *ud)
{
    return cal_buf_append(ud, p, sz * nm) == CAL_OK ? sz * nm : 0;
}

static long fetch(const char *url, const char *body, cal_buf *out, char *ctype, size_t cn)
{
    CURL *h = curl_easy_init();
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, to_buf);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    }
    long st = -1;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    char *ct = NULL;
    curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
    if (ctype) snprintf(ctype, cn, "%s", ct ? ct : "");
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    return st;
}

static void test_live_proxy(void **state)
{
    (void)state;
    struct sockaddr_in sa;   /* loopback only */
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *up = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD,
                                             0, NULL, NULL, upstream, NULL,
                                             MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_END);
    assert_non_null(up);
    int up_port = MHD_get_daemon_info(up, MHD_DAEMON_INFO_BIND_PORT)->port;
    char up_url[64], url[128];
    snprintf(up_url, sizeof up_url, "http://127.0.0.1:%d/", up_port);   /* trailing '/' is dropped */
    got g = {.n = 0};
    pthread_mutex_init(&g.mu, NULL);
    cal_proxy_config cfg = {.port = 0, .upstream = up_url, .tokenize = 1, .on_turn = on_turn, .ud = &g};
    cal_proxy *px = NULL;
    char why[128];
    assert_int_equal(cal_proxy_open(&cfg, &px, why, sizeof why), CAL_OK);
    int port = cal_proxy_port(px);
    assert_true(port > 0);

    /* a streamed turn: the client gets every byte the upstream sent */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", port);
    cal_buf b = CAL_BUF_INIT(1 << 20);
    char ct[128];
    struct timespec c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &c0);
    assert_int_equal(fetch(url, CHAT, &b, ct, sizeof ct), 200);
    clock_gettime(CLOCK_MONOTONIC, &c1);
    double client_s = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
    assert_string_equal(ct, "text/event-stream");
    cal_buf want = CAL_BUF_INIT(1 << 20);
    for (size_t i = 0; i < N_EVENTS; i++) cal_buf_puts(&want, EVENTS[i]);
    assert_int_equal(b.len, want.len);
    assert_memory_equal(b.data, want.data, want.len);
    /* the turn is recorded after the client's last byte: wait for it */
    cal_proxy_turn turn;
    assert_int_equal(wait_turns(&g, 1, &turn), 1);
    const cal_proxy_turn *t = &turn;
    assert_int_equal(t->index, 1);
    assert_int_equal(t->status, 200);
    assert_string_equal(t->error, "");
    assert_string_equal(t->path, "/v1/chat/completions");
    /* the first text came one drip after the request; decode spans two more */
    /* lower bounds from the drip; upper bounds from the client's own wall
     * time around the request, which holds the whole turn however slow this
     * machine is today */
    assert_true(t->ttft_s >= 0.9 * DRIP_MS / 1e3);
    assert_true(t->decode_s >= 1.8 * DRIP_MS / 1e3);
    assert_true(t->turn_s >= t->ttft_s + t->decode_s - 1e-9);
    assert_true(t->turn_s <= client_s);
    assert_int_equal(t->text_chunks, 3);
    /* a drip apart, the first and the last text came in different reads */
    assert_true(t->text_reads >= 2 && t->text_reads <= 3);
    assert_int_equal(t->output_tokens, 3);
    assert_true(t->output_from_usage);
    assert_int_equal(t->usage_prompt_tokens, 40);
    NEAR(t->decode_tok_s, (3 - 1) / t->decode_s, 1e-9);   /* the run's formula */
    NEAR(t->ttft_share, t->ttft_s / t->turn_s, 1e-12);
    /* this upstream has no /tokenize: counts stay estimated */
    assert_true(t->prefix_estimated);
    assert_int_equal(t->prefix.part[CAL_PART_SYSTEM].chars, 23);
    assert_int_equal(t->prefix.part[CAL_PART_NEW].chars, 8);
    long sum = 0;
    for (int k = 0; k < CAL_PART_N; k++) { sum += t->prefix.part[k].tokens; assert_null(t->prefix.text[k]); }
    assert_int_equal(t->prefix_tokens, sum);

    /* other paths pass through with their query, and are not turns */
    cal_buf_reset(&b);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/models?x=a%%20b", port);
    assert_int_equal(fetch(url, NULL, &b, ct, sizeof ct), 200);
    assert_non_null(strstr(b.data, "\"q\":\"a b\""));
    assert_string_equal(ct, "application/json");
    cal_buf_reset(&b);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/nowhere", port);
    assert_int_equal(fetch(url, NULL, &b, NULL, 0), 404);
    /* a target that is not a path is refused, never forwarded: joined to the
     * upstream URL as text, "@127.0.0.1:UP/v1/models" became its userinfo
     * and reached UP's /v1/models (200) */
    char steer[64];
    snprintf(steer, sizeof steer, "@127.0.0.1:%d/v1/models", up_port);
    assert_int_equal(raw_status(port, steer), 400);
    snprintf(steer, sizeof steer, "http://127.0.0.1:%d/v1/models", up_port);
    assert_int_equal(raw_status(port, steer), 400);
    assert_int_equal(raw_status(port, "/v1/models?x=1"), 200);
    sleep_ms(50);
    assert_int_equal(wait_turns(&g, 0, NULL), 1);
    cal_proxy_close(&px);
    assert_null(px);
    MHD_stop_daemon(up);

    /* an upstream that is not there: 502 with the reason, and a turn with the error */
    cfg.upstream = up_url;   /* the port is closed now */
    assert_int_equal(cal_proxy_open(&cfg, &px, why, sizeof why), CAL_OK);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", cal_proxy_port(px));
    cal_buf_reset(&b);
    assert_int_equal(fetch(url, CHAT, &b, NULL, 0), 502);
    assert_non_null(strstr(b.data, "proxy_error"));
    assert_int_equal(wait_turns(&g, 2, &turn), 2);
    assert_non_null(strstr(turn.error, "upstream"));
    cal_proxy_close(&px);
    cal_buf_free(&b);
    cal_buf_free(&want);

    /* bad configurations */
    cfg.upstream = "ftp://x";
    assert_int_equal(cal_proxy_open(&cfg, &px, why, sizeof why), CAL_EINVAL);
    assert_non_null(strstr(why, "ftp://x"));
    cfg.upstream = "http://127.0.0.1:99999";        /* curl's URL parser refuses the port */
    assert_int_equal(cal_proxy_open(&cfg, &px, why, sizeof why), CAL_EINVAL);
    assert_non_null(strstr(why, "not a URL"));
    assert_null(px);
    cfg.upstream = up_url;
    cfg.host = "localhost";
    assert_int_equal(cal_proxy_open(&cfg, &px, why, sizeof why), CAL_EINVAL);
    assert_null(px);
    pthread_mutex_destroy(&g.mu);
}

int main(void)
{
    cal_global_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_chat),
        cmocka_unit_test(test_prefix_completions_and_errors),
        cmocka_unit_test(test_turn_json),
        cmocka_unit_test(test_target_check),
        cmocka_unit_test(test_upstream_url),
        cmocka_unit_test(test_live_proxy),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
