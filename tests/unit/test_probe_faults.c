/* The probe against a misbehaving server over real loopback sockets
 * (tests/helpers/faultserver): each fault ends in its one status, the counts
 * add up, nothing hangs (short idle/connect/request timeouts); load shapes,
 * stop and deadline; the epoll_wait fallback; every jansson allocation of a
 * short run failing in turn; and `caliper serve --preset tiny` when that
 * binary starts. No assertion bounds the wall clock from above unless the
 * bound is a large fraction of a wait the test itself arranged. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>
#include "caliper/buf.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/probe.h"

static char g_bindir[4096];
static pid_t g_server = -1;
static int g_port;
static pid_t g_pace_server = -1;     /* test_deferred_interpretation's server */
static int64_t g_request_timeout_ns; /* run_mode's cal_probe_config.request_timeout_ns */
static int g_keep_chunks = 1;        /* run_mode's keep_chunks */
static int g_loops = 0;              /* run_mode's loops (CALIPER_TEST_PROBE_LOOPS) */

/* Start argv[0] with stdout on a pipe; read until a line holds the port (after
 * `prefix`), up to timeout_ms. Returns the pid or -1. */
static pid_t spawn_port(char *const argv[], const char *prefix, int timeout_ms, int *port)
{
    int pfd[2];
    if (pipe(pfd)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        close(pfd[0]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(pfd[1]);
    char buf[4096];
    size_t len = 0;
    int64_t end = cal_now_ns() + (int64_t)timeout_ms * 1000000;
    *port = 0;
    while (cal_now_ns() < end && len < sizeof buf - 1) {
        fd_set rs;
        FD_ZERO(&rs);
        FD_SET(pfd[0], &rs);
        struct timeval tv = { 0, 50000 };
        if (select(pfd[0] + 1, &rs, NULL, NULL, &tv) <= 0) continue;
        ssize_t r = read(pfd[0], buf + len, sizeof buf - 1 - len);
        if (r <= 0) break;
        len += (size_t)r;
        buf[len] = '\0';
        char *at = strstr(buf, prefix);
        if (at && strchr(at, '\n')) { *port = atoi(at + strlen(prefix)); break; }
    }
    close(pfd[0]);
    if (*port <= 0) { kill(pid, SIGKILL); waitpid(pid, NULL, 0); return -1; }
    return pid;
}

static int setup(void **state)
{
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/helpers/faultserver", g_bindir);
    char *argv[] = { path, NULL };
    signal(SIGPIPE, SIG_IGN);
    g_server = spawn_port(argv, "port ", 60000, &g_port);   /* a bound on failure only */
    return g_server > 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    if (g_server > 0) { kill(g_server, SIGTERM); waitpid(g_server, NULL, 0); }
    if (g_pace_server > 0) { kill(g_pace_server, SIGKILL); waitpid(g_pace_server, NULL, 0); }
    return 0;
}

typedef struct outcome {
    int count[CAL_REQ_N_STATUS];
    int rc;
    int64_t wall_ns;
    cal_probe_stats st;
} outcome;

/* What each request's end hook saw (cal_load.on_end): how often each index
 * was named, and whether it named the wrong request. Loops call it at once. */
typedef struct ends {
    const cal_request *reqs;
    size_t n;
    atomic_int calls[64];
    atomic_int wrong;
} ends;
static ends *g_ends;

static void count_end(void *ud, size_t index, cal_req_result *r)
{
    ends *e = ud;
    if (index >= e->n) { atomic_fetch_add(&e->wrong, 1); return; }
    atomic_fetch_add(&e->calls[index], 1);
    /* the index names this very request: an echo answer holds its prompt */
    if (r->text && strstr(r->text, "prompt number") && !strstr(r->text, e->reqs[index].prompt))
        atomic_fetch_add(&e->wrong, 1);
}

static outcome run_mode(const char *mode, cal_api api, size_t n, int conc, double rate,
                        int64_t idle_ms, cal_req_result *res, const cal_request *reqs_in,
                        int64_t deadline_ns, volatile int *stop,
                        cal_probe_progress_fn prog, void *ud)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/%s", g_port, mode);
    cal_probe_config cfg = {
        .base_url = url, .api = api, .model = "m", .ignore_eos = 1,
        .connect_timeout_ns = 1000000000, .idle_timeout_ns = idle_ms * 1000000,
        .request_timeout_ns = g_request_timeout_ns,
        .keep_chunks = g_keep_chunks, .keep_text = 1, .keep_send_ns = 1,
        .loops = g_loops,
    };
    cal_probe *p = NULL;
    assert_int_equal(cal_probe_open(&cfg, &p), CAL_OK);
    cal_request *reqs = malloc(n * sizeof *reqs);
    for (size_t i = 0; i < n; i++)
        reqs[i] = reqs_in ? reqs_in[i] : (cal_request){ .prompt = "Say something.", .max_tokens = 8 };
    cal_load load = { .concurrency = conc, .rate = rate, .seed = 7, .deadline_ns = deadline_ns };
    if (g_ends) { load.on_end = count_end; load.on_end_ud = g_ends; }
    outcome o;
    memset(&o, 0, sizeof o);
    int64_t t0 = cal_now_ns();
    o.rc = cal_probe_run(p, reqs, n, &load, res, stop, prog, ud, &o.st);
    o.wall_ns = cal_now_ns() - t0;
    int total = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true((unsigned)res[i].status < CAL_REQ_N_STATUS);
        o.count[res[i].status]++;
        total++;
        /* every non-ok request says why */
        if (res[i].status != CAL_REQ_OK) assert_non_null(res[i].error);
    }
    assert_int_equal(total, (int)n);             /* the counts add up */
    /* the stats count the same, and name the first failure */
    int first = -1;
    for (size_t i = 0; i < n && first < 0; i++)
        if (res[i].status != CAL_REQ_OK && res[i].status != CAL_REQ_CANCELLED) first = (int)i;
    for (int k = 0; k < CAL_REQ_N_STATUS; k++) assert_int_equal(o.st.n_status[k], o.count[k]);
    assert_int_equal(o.st.first_fail, first);
    if (first >= 0) assert_int_equal(strncmp(o.st.first_fail_msg, res[first].error, 40), 0);
    free(reqs);
    cal_probe_close(&p);
    assert_null(p);
    return o;
}

static void free_all(cal_req_result *r, size_t n)
{
    for (size_t i = 0; i < n; i++) cal_req_result_free(&r[i]);
}

static void expect_all(const char *mode, cal_api api, cal_req_status want, int64_t idle_ms)
{
    cal_req_result res[4];
    outcome o = run_mode(mode, api, 4, 2, 0, idle_ms, res, NULL, 0, NULL, NULL, NULL);
    if (o.count[want] != 4) {
        fail_msg("mode %s: %d of 4 ended %s; first: %s (%s, http %d)", mode, o.count[want],
                 cal_req_status_name(want), cal_req_status_name(res[0].status),
                 res[0].error ? res[0].error : "-", res[0].http_status);
    }
    assert_int_equal(o.rc, CAL_OK);
    free_all(res, 4);
}

static void test_normal_completions_and_chat(void **state)
{
    (void)state;
    for (int api = 0; api < 2; api++) {
        cal_req_result res[6];
        outcome o = run_mode("normal", (cal_api)api, 6, 3, 0, 2000, res, NULL, 0, NULL, NULL, NULL);
        assert_int_equal(o.count[CAL_REQ_OK], 6);
        for (int i = 0; i < 6; i++) {
            cal_req_result *r = &res[i];
            assert_int_equal(r->http_status, 200);
            assert_int_equal(r->output_tokens, 8);
            assert_int_equal(r->tok_source, CAL_TOKSRC_USAGE);
            assert_int_equal(r->prompt_tokens, 5);
            /* the chat role-only chunk is not a token chunk */
            assert_int_equal(r->n_chunks, 8);
            assert_string_equal(r->text, "tok0 tok1 tok2 tok3 tok4 tok5 tok6 tok7 ");
            assert_true(r->sched_ns <= r->send_ns);
            assert_true(r->send_ns < r->first_byte_ns);
            assert_true(r->first_byte_ns <= r->first_token_ns);
            assert_true(r->first_token_ns <= r->last_token_ns);
            assert_true(r->last_token_ns <= r->end_ns);
            assert_true(r->first_token_ns == r->chunk_ns[0]);
            /* stamps never go back, and none is earlier than the server
             * sent that chunk (it stamps each, >= 2 ms apart): how late the
             * probe reads on a busy machine cannot break this */
            for (int k = 1; k < r->n_chunks; k++) assert_true(r->chunk_ns[k] >= r->chunk_ns[k - 1]);
            for (int k = 0; k < r->n_chunks; k++) {
                assert_true(r->chunk_send_ns[k] > 0);
                assert_true(r->chunk_ns[k] >= r->chunk_send_ns[k]);
                if (k) assert_true(r->chunk_send_ns[k] - r->chunk_send_ns[k - 1] >= 2000000);
            }
            assert_null(r->error);
        }
        assert_true(o.st.chunks >= 6 * 10);
        assert_true(o.st.cpu_ns > 0 && o.st.wall_ns > 0);
        assert_int_equal(o.st.max_in_flight, 3);
        /* Send lag, checked by what it is rather than by how fast a busy
         * machine is: closed loop, the first 3 are due at the start, and
         * each later one when an earlier request's last byte freed its slot;
         * the stats' lags are send - sched of these very results. */
        double max_lag = 0;
        for (int i = 0; i < 6; i++) {
            if (i < 3) {
                assert_true(res[i].sched_ns == res[0].sched_ns);
            } else {
                int freed_by = -1;
                for (int j = 0; j < i; j++) if (res[j].end_ns == res[i].sched_ns) freed_by = j;
                assert_true(freed_by >= 0);
            }
            double lag = (double)(res[i].send_ns - res[i].sched_ns) / 1e6;
            if (lag > max_lag) max_lag = lag;
        }
        assert_true(o.st.send_lag_max_ms == max_lag);
        assert_true(0 <= o.st.send_lag_p50_ms && o.st.send_lag_p50_ms <= o.st.send_lag_p99_ms);
        assert_true(o.st.send_lag_p99_ms <= o.st.send_lag_max_ms);
        free_all(res, 6);
    }
}

/* libcurl 7.x counts a handle's retries over its life and fails the sixth:
 * a handle whose request went out twice is reset, so 12 requests in a row
 * over connections the server drops when reused all end ok; a handle whose
 * request went out once and ended cleanly is kept as it is (a reset and the
 * options set again cost 4,400 instructions a request). */
static void test_handle_reset_after_retry_only(void **state)
{
    (void)state;
    cal_req_result res[12];
    outcome o = run_mode("keepdrop", CAL_API_COMPLETIONS, 12, 1, 0, 2000, res, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o.count[CAL_REQ_OK], 12);
    /* requests 2..12 each found their reused connection dropped */
    assert_int_equal(o.st.handle_resets, 11);
    free_all(res, 12);
    o = run_mode("normal", CAL_API_COMPLETIONS, 12, 2, 0, 2000, res, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o.count[CAL_REQ_OK], 12);
    assert_int_equal(o.st.handle_resets, 0);
    free_all(res, 12);
    o = run_mode("hang", CAL_API_COMPLETIONS, 2, 2, 0, 300, res, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o.count[CAL_REQ_TIMEOUT], 2);
    assert_int_equal(o.st.handle_resets, 2);    /* ended by the probe, not cleanly */
    free_all(res, 2);
}

static void test_drip_feed_parses(void **state)
{
    (void)state;
    cal_req_result res[2];
    outcome o = run_mode("drip", CAL_API_CHAT, 2, 2, 0, 2000, res, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o.count[CAL_REQ_OK], 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(res[i].n_chunks, 8);
        assert_int_equal(res[i].output_tokens, 8);
        assert_string_equal(res[i].text, "tok0 tok1 tok2 tok3 tok4 tok5 tok6 tok7 ");
    }
    free_all(res, 2);
}

static void test_faults(void **state)
{
    (void)state;
    expect_all("truncate", CAL_API_COMPLETIONS, CAL_REQ_STREAM_ERROR, 2000);
    expect_all("truncchunk", CAL_API_COMPLETIONS, CAL_REQ_STREAM_ERROR, 2000);
    expect_all("reset", CAL_API_CHAT, CAL_REQ_STREAM_ERROR, 2000);
    expect_all("resetearly", CAL_API_CHAT, CAL_REQ_CONNECT_ERROR, 2000);
    expect_all("garbage", CAL_API_COMPLETIONS, CAL_REQ_STREAM_ERROR, 2000);
    expect_all("garbagehttp", CAL_API_COMPLETIONS, CAL_REQ_STREAM_ERROR, 2000);
    expect_all("nodone", CAL_API_COMPLETIONS, CAL_REQ_STREAM_ERROR, 2000);
    expect_all("finishnodone", CAL_API_CHAT, CAL_REQ_OK, 2000);
    expect_all("errorevent", CAL_API_CHAT, CAL_REQ_STREAM_ERROR, 2000);
    expect_all("keepalive", CAL_API_CHAT, CAL_REQ_OK, 2000);
    expect_all("hang", CAL_API_COMPLETIONS, CAL_REQ_TIMEOUT, 300);
    expect_all("slowfirst", CAL_API_COMPLETIONS, CAL_REQ_TIMEOUT, 150);
    expect_all("slowfirst", CAL_API_COMPLETIONS, CAL_REQ_OK, 1000);
}

static void test_http_errors_keep_status_and_body(void **state)
{
    (void)state;
    const char *modes[] = { "429", "500" };
    int codes[] = { 429, 500 };
    const char *words[] = { "rate limit reached", "engine died" };
    for (int m = 0; m < 2; m++) {
        cal_req_result res[3];
        outcome o = run_mode(modes[m], CAL_API_COMPLETIONS, 3, 1, 0, 2000, res, NULL, 0, NULL, NULL, NULL);
        assert_int_equal(o.count[CAL_REQ_HTTP_ERROR], 3);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(res[i].http_status, codes[m]);
            assert_non_null(strstr(res[i].error, words[m]));
        }
        free_all(res, 3);
    }
}

static void test_json_and_llama_timings(void **state)
{
    (void)state;
    cal_req_result res[2];
    outcome o = run_mode("json", CAL_API_CHAT, 2, 1, 0, 2000, res, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o.count[CAL_REQ_OK], 2);
    assert_int_equal(res[0].output_tokens, 2);
    assert_int_equal(res[0].tok_source, CAL_TOKSRC_USAGE);
    assert_string_equal(res[0].text, "hello world");
    assert_true(res[0].first_token_ns == res[0].end_ns);
    free_all(res, 2);
    o = run_mode("llama", CAL_API_CHAT, 2, 2, 0, 2000, res, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o.count[CAL_REQ_OK], 2);
    /* no usage in this shape: tokens are counted chunks, and say so */
    assert_int_equal(res[1].tok_source, CAL_TOKSRC_CHUNKS);
    assert_int_equal(res[1].output_tokens, 8);
    assert_true(res[1].server_decode_ms == 40.0);
    assert_true(res[1].server_prefill_ms == 12.5);
    assert_int_equal(res[1].server_decode_tokens, 8);
    free_all(res, 2);
}

/* What goes on the wire: the fault server echoes the raw request. */
static json_t *echo_request(const cal_probe_config *cfg0, const char *prompt, int max_tokens,
                            char *head, size_t headsz)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/echo/", g_port);
    cal_probe_config cfg = *cfg0;
    cfg.base_url = url;
    cfg.keep_text = 1;
    cal_probe *p = NULL;
    assert_int_equal(cal_probe_open(&cfg, &p), CAL_OK);
    cal_request rq = { .prompt = prompt, .max_tokens = max_tokens };
    cal_req_result r;
    cal_load one = { .concurrency = 1 };
    assert_int_equal(cal_probe_run(p, &rq, 1, &one, &r, NULL, NULL, NULL, NULL), CAL_OK);
    assert_int_equal(r.status, CAL_REQ_OK);
    assert_non_null(r.text);
    char *sep = strstr(r.text, "\r\n\r\n");
    assert_non_null(sep);
    snprintf(head, headsz, "%.*s", (int)(sep - r.text), r.text);
    json_error_t je;
    json_t *body = json_loads(sep + 4, 0, &je);
    assert_non_null(body);
    cal_req_result_free(&r);
    cal_probe_close(&p);
    return body;
}

static void test_request_body(void **state)
{
    (void)state;
    char head[4096];
    const char *prompt = "h\xc3\xa9llo \"q\"\n\xe2\x82\xac \xf0\x9f\x98\x80";   /* 2, 3, 4 bytes */
    cal_probe_config chat = { .api = CAL_API_CHAT, .model = "m1", .api_key = "sk-test",
                              .ignore_eos = 1,
                              .extra_body = "{\"temperature\":0.5,\"stream_options\":null}" };
    json_t *b = echo_request(&chat, prompt, 7, head, sizeof head);
    assert_non_null(strstr(head, "POST /echo/v1/chat/completions HTTP/1.1"));
    assert_non_null(strstr(head, "Authorization: Bearer sk-test"));
    assert_non_null(strstr(head, "Content-Type: application/json"));
    assert_string_equal(json_string_value(json_object_get(b, "model")), "m1");
    json_t *m0 = json_array_get(json_object_get(b, "messages"), 0);
    assert_string_equal(json_string_value(json_object_get(m0, "role")), "user");
    assert_string_equal(json_string_value(json_object_get(m0, "content")), prompt);
    assert_int_equal(json_integer_value(json_object_get(b, "max_tokens")), 7);
    assert_int_equal(json_integer_value(json_object_get(b, "min_tokens")), 7);
    assert_true(json_is_true(json_object_get(b, "ignore_eos")));
    assert_true(json_is_true(json_object_get(b, "stream")));
    assert_true(json_real_value(json_object_get(b, "temperature")) == 0.5);
    assert_null(json_object_get(b, "stream_options"));          /* null removed it */
    assert_null(json_object_get(b, "prompt"));
    json_decref(b);

    cal_probe_config comp = { .api = CAL_API_COMPLETIONS };
    b = echo_request(&comp, "abc", 0, head, sizeof head);
    assert_non_null(strstr(head, "POST /echo/v1/completions HTTP/1.1"));
    assert_null(strstr(head, "Authorization"));
    assert_string_equal(json_string_value(json_object_get(b, "prompt")), "abc");
    assert_null(json_object_get(b, "model"));
    assert_null(json_object_get(b, "max_tokens"));               /* 0: left to the server */
    assert_null(json_object_get(b, "ignore_eos"));
    assert_true(json_is_true(json_object_get(json_object_get(b, "stream_options"), "include_usage")));
    json_decref(b);
}

/* Bodies are reused only for the same prompt and max_tokens: a run whose
 * requests repeat a prompt (by pointer or by content), change max_tokens, or
 * change the prompt sends each request its own fields. */
static void test_request_body_reuse(void **state)
{
    (void)state;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/echo/", g_port);
    cal_probe_config cfg = { .base_url = url, .api = CAL_API_COMPLETIONS, .keep_text = 1 };
    cal_probe *p = NULL;
    assert_int_equal(cal_probe_open(&cfg, &p), CAL_OK);
    char same[] = "alpha", copy[] = "alpha";
    cal_request rq[6] = {
        { .prompt = same, .max_tokens = 5 }, { .prompt = same, .max_tokens = 5 },
        { .prompt = copy, .max_tokens = 5 }, { .prompt = copy, .max_tokens = 9 },
        { .prompt = "beta", .max_tokens = 9 }, { .prompt = same, .max_tokens = 5 } };
    const char *want_prompt[6] = { "alpha", "alpha", "alpha", "alpha", "beta", "alpha" };
    const int want_max[6] = { 5, 5, 5, 9, 9, 5 };
    cal_req_result r[6];
    cal_load one = { .concurrency = 1 };             /* in order: each body follows the last */
    assert_int_equal(cal_probe_run(p, rq, 6, &one, r, NULL, NULL, NULL, NULL), CAL_OK);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(r[i].status, CAL_REQ_OK);
        char *sep = strstr(r[i].text, "\r\n\r\n");
        assert_non_null(sep);
        json_error_t je;
        json_t *b = json_loads(sep + 4, 0, &je);
        assert_non_null(b);
        assert_string_equal(json_string_value(json_object_get(b, "prompt")), want_prompt[i]);
        assert_int_equal(json_integer_value(json_object_get(b, "max_tokens")), want_max[i]);
        json_decref(b);
        cal_req_result_free(&r[i]);
    }
    cal_probe_close(&p);
}

static void test_connection_refused(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    close(fd);                                   /* nobody listens there now */
    int saved = g_port;
    g_port = ntohs(a.sin_port);
    expect_all("normal", CAL_API_COMPLETIONS, CAL_REQ_CONNECT_ERROR, 2000);
    g_port = saved;
}

static void test_open_loop_poisson(void **state)
{
    (void)state;
    enum { N = 40 };
    cal_req_result res[N];
    outcome o = run_mode("normal", CAL_API_COMPLETIONS, N, 0, 400.0, 2000, res, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o.count[CAL_REQ_OK], N);
    /* arrivals are scheduled ahead, increasing, and the run spans them:
     * mean gap 2.5 ms, so 40 arrivals take about 100 ms */
    for (int i = 1; i < N; i++) assert_true(res[i].sched_ns >= res[i - 1].sched_ns);
    double span_ms = (double)(res[N - 1].sched_ns - res[0].sched_ns) / 1e6;
    assert_true(span_ms > 20 && span_ms < 500);
    for (int i = 0; i < N; i++) assert_true(res[i].send_ns >= res[i].sched_ns);
    /* with no in-flight cap, requests overlap (each lasts ≥ 16 ms) */
    assert_true(o.st.max_in_flight > 1);
    int64_t off[N];
    for (int i = 0; i < N; i++) off[i] = res[i].sched_ns - res[0].sched_ns;
    free_all(res, N);
    /* the same seed gives the same schedule */
    run_mode("normal", CAL_API_COMPLETIONS, N, 0, 400.0, 2000, res, NULL, 0, NULL, NULL, NULL);
    for (int i = 0; i < N; i++) assert_true(res[i].sched_ns - res[0].sched_ns == off[i]);
    free_all(res, N);
    /* an in-flight cap: arrivals at 1000/s meet 2 slots of >= 16 ms, so the
     * client queues them, and the queueing shows as send lag, not hidden */
    enum { M = 10 };
    cal_req_result res3[M];
    outcome o3 = run_mode("normal", CAL_API_COMPLETIONS, M, 2, 1000.0, 2000, res3, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o3.count[CAL_REQ_OK], M);
    assert_int_equal(o3.st.max_in_flight, 2);
    assert_true(o3.st.send_lag_max_ms > 20);
    assert_true(res3[M - 1].send_ns - res3[M - 1].sched_ns > 20000000);
    assert_true(res3[M - 1].first_token_ns - res3[M - 1].sched_ns > res3[M - 1].first_token_ns - res3[M - 1].send_ns);
    free_all(res3, M);
}

static void stop_after_three(void *ud, size_t done, size_t total)
{
    (void)total;
    if (done >= 3) *(volatile int *)ud = 1;
}

static void test_stop_and_deadline(void **state)
{
    (void)state;
    enum { N = 20 };
    cal_req_result res[N];
    volatile int stop = 0;
    outcome o = run_mode("normal", CAL_API_COMPLETIONS, N, 2, 0, 2000, res, NULL, 0, &stop,
                         stop_after_three, (void *)&stop);
    assert_int_equal(o.rc, CAL_ECANCEL);
    assert_true(o.count[CAL_REQ_OK] >= 3 && o.count[CAL_REQ_OK] < N);
    assert_int_equal(o.count[CAL_REQ_OK] + o.count[CAL_REQ_CANCELLED], N);
    assert_int_equal(res[N - 1].status, CAL_REQ_CANCELLED);
    assert_int_equal(res[N - 1].send_ns, 0);          /* never sent */
    free_all(res, N);
    /* deadline: a hanging server, in-flight and unsent end as cancelled
     * (an idle timeout would end them as timeout, 30 s later) */
    int64_t dl = cal_now_ns() + 200000000;
    o = run_mode("hang", CAL_API_COMPLETIONS, N, 4, 0, 30000, res, NULL, dl, NULL, NULL, NULL);
    assert_int_equal(o.rc, CAL_OK);
    assert_int_equal(o.count[CAL_REQ_CANCELLED], N);
    int sent = 0;
    for (int i = 0; i < N; i++) {
        sent += res[i].send_ns != 0;
        assert_non_null(strstr(res[i].error, "load deadline"));
        if (res[i].send_ns) assert_true(res[i].end_ns >= dl);
    }
    assert_int_equal(sent, 4);
    free_all(res, N);
}

static void test_bad_config(void **state)
{
    (void)state;
    cal_probe *p = NULL;
    cal_probe_config cfg = { .base_url = "http://127.0.0.1:1", .extra_body = "[1]" };
    assert_int_equal(cal_probe_open(&cfg, &p), CAL_EINVAL);     /* not an object */
    assert_null(p);
    cfg.extra_body = "{\"temperature\":0}";
    assert_int_equal(cal_probe_open(&cfg, &p), CAL_OK);
    cal_request rq = { .prompt = "\xff\xfe not utf-8", .max_tokens = 4 };
    cal_req_result r;
    cal_load closed0 = { .concurrency = 0 };
    assert_int_equal(cal_probe_run(p, &rq, 1, &closed0, &r, NULL, NULL, NULL, NULL), CAL_EINVAL);
    cal_load one = { .concurrency = 1 };
    assert_int_equal(cal_probe_run(p, &rq, 1, &one, &r, NULL, NULL, NULL, NULL), CAL_EINVAL);
    assert_int_equal(r.status, CAL_REQ_CANCELLED);               /* still a status */
    /* what jansson would refuse: overlong, surrogate, past U+10FFFF, cut short */
    const char *bad[] = { "\xc0\xaf", "a\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82" };
    for (int i = 0; i < 4; i++) {
        rq.prompt = bad[i];
        assert_int_equal(cal_probe_run(p, &rq, 1, &one, &r, NULL, NULL, NULL, NULL), CAL_EINVAL);
        assert_null(json_string(bad[i]));                        /* the same verdict */
    }
    cal_probe_close(&p);
    cfg.base_url = NULL;
    assert_int_equal(cal_probe_open(&cfg, &p), CAL_EINVAL);
}

static void test_many_streams(void **state)
{
    (void)state;
    enum { N = 300 };
    cal_req_result *res = calloc(N, sizeof *res);
    outcome o = run_mode("normal", CAL_API_COMPLETIONS, N, 100, 0, 3000, res, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o.count[CAL_REQ_OK], N);
    assert_int_equal(o.st.max_in_flight, 100);
    free_all(res, N);
    free(res);
}

/* The built-in engine, when this build has it. */
static void test_against_caliper_serve(void **state)
{
    (void)state;
    char bin[4200];
    snprintf(bin, sizeof bin, "%s/../caliper", g_bindir);
    char *argv[] = { bin, "serve", "--port", "0", "--preset", "tiny", NULL };
    int port = 0;
    pid_t pid = access(bin, X_OK) == 0 ? spawn_port(argv, "http://127.0.0.1:", 15000, &port) : -1;
    if (pid < 0) {
        print_message("# SKIP caliper serve --preset tiny did not start in this build\n");
        skip();
        return;
    }
    int saved = g_port;
    g_port = port;
    cal_req_result res[4];
    outcome o = run_mode("", CAL_API_COMPLETIONS, 4, 2, 0, 20000, res, NULL, 0, NULL, NULL, NULL);
    g_port = saved;
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    if (o.count[CAL_REQ_OK] != 4)
        fail_msg("caliper serve: %d of 4 ok; first %s: %s", o.count[CAL_REQ_OK],
                 cal_req_status_name(res[0].status), res[0].error ? res[0].error : "-");
    for (int i = 0; i < 4; i++) {
        assert_true(res[i].output_tokens > 0 && res[i].output_tokens <= 8);
        assert_true(res[i].n_chunks > 0);
        assert_true(res[i].first_token_ns > res[i].send_ns);
    }
    free_all(res, 4);
}

/* ---- deferred interpretation ---------------------------------------------
 * The probe stamps each event when its bytes arrive and interprets the JSON
 * later (when the loop is idle, or at the request's end). A small server of
 * our own (a forked process per connection) sends shapes that only matter
 * for that: events that wait behind a burst, more of them in one write than
 * the probe lets wait, and an error event followed by silence. */
/* Wait until the peer of fd has read everything sent to it (its receive
 * queue in /proc/net/tcp is empty), so that what is sent next cannot arrive
 * in the same read however slow the reader is; gives up after 20 s. */
static void wait_peer_read(int fd)
{
    struct sockaddr_in me, peer;
    socklen_t l1 = sizeof me, l2 = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&me, &l1) || getpeername(fd, (struct sockaddr *)&peer, &l2))
        return;
    for (int tries = 0; tries < 20000; tries++) {
        FILE *f = fopen("/proc/net/tcp", "r");
        if (!f) return;
        char line[512];
        long rxq = -1;
        while (fgets(line, sizeof line, f)) {
            unsigned la, lp, ra, rp, st;
            unsigned long txq, rq;
            if (sscanf(line, " %*d: %x:%x %x:%x %x %lx:%lx", &la, &lp, &ra, &rp, &st, &txq, &rq) == 7
                && lp == ntohs(peer.sin_port) && rp == ntohs(me.sin_port))
                rxq = (long)rq;                      /* the peer's socket */
        }
        fclose(f);
        if (rxq <= 0) return;
        usleep(1000);
    }
}

static void pace_serve(int fd)
{
    char req[8192];
    size_t len = 0;
    char *hend = NULL;
    while (len < sizeof req - 1 && !hend) {          /* headers (the body may follow) */
        ssize_t r = recv(fd, req + len, sizeof req - 1 - len, 0);
        if (r <= 0) return;
        len += (size_t)r;
        req[len] = '\0';
        hend = strstr(req, "\r\n\r\n");
    }
    if (!hend) return;
    const char *cl = strstr(req, "Content-Length: ");
    size_t want = cl ? (size_t)atol(cl + 16) : 0, got = len - (size_t)(hend + 4 - req);
    while (got < want) {
        ssize_t r = recv(fd, req, sizeof req, 0);
        if (r <= 0) return;
        got += (size_t)r;
    }
    static const char hdr[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                              "Connection: close\r\n\r\n";
    static const char role[] = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
    cal_buf b = CAL_BUF_INIT(1 << 20);
    cal_buf_puts(&b, hdr);
    cal_buf_puts(&b, role);
    for (int k = 0; k < 2; k++)
        cal_buf_printf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a%d \"}}]}\n\n", k);
    if (strstr(req, "/errhang/")) {
        cal_buf_puts(&b, "data: {\"error\":{\"message\":\"engine crashed\",\"code\":500}}\n\n");
        send(fd, b.data, b.len, MSG_NOSIGNAL);
        recv(fd, req, sizeof req, 0);                /* silent until the client hangs up */
    } else {                                         /* /burst/ */
        send(fd, b.data, b.len, MSG_NOSIGNAL);
        cal_buf_reset(&b);
        wait_peer_read(fd);                          /* the probe has read (and stamped) them */
        usleep(40000);
        /* the first burst event carries when the burst was sent (the
         * monotonic clock is one across processes) */
        for (int k = 0; k < 300; k++)
            cal_buf_printf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b%d \"}}]%s}\n\n",
                           k, k ? "" : ",\"send_ns\":SEND_NS_PLACEHOLDER");
        char *at = strstr(b.data, "SEND_NS_PLACEHOLDER");      /* 19 wide: int64 fits */
        char stamp[32];
        snprintf(stamp, sizeof stamp, "%-19lld", (long long)cal_now_ns());
        memcpy(at, stamp, 19);                       /* padded with spaces: valid JSON */
        cal_buf_puts(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n"
                         "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":302}}\n\n"
                         "data: [DONE]\n\n");
        send(fd, b.data, b.len, MSG_NOSIGNAL);
    }
    cal_buf_free(&b);
}

static pid_t pace_server_start(int *port)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 64)
        || getsockname(lfd, (struct sockaddr *)&a, &al)) return -1;
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    if (pid == 0) {
        /* dies with the test, and holds none of its output open */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int dn = open("/dev/null", O_WRONLY);
        if (dn >= 0) { dup2(dn, 1); dup2(dn, 2); close(dn); }
        signal(SIGCHLD, SIG_IGN);                    /* no zombies */
        for (;;) {
            int c = accept(lfd, NULL, NULL);
            if (c < 0) continue;
            if (fork() == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                close(lfd);
                pace_serve(c);
                close(c);
                _exit(0);
            }
            close(c);
        }
    }
    close(lfd);
    return pid;
}

static void run_pace(int port, const char *mode, size_t n, int64_t idle_ns, cal_req_result *res,
                     int64_t *wall)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/%s", port, mode);
    cal_probe_config cfg = { .base_url = url, .api = CAL_API_CHAT, .keep_chunks = 1, .keep_text = 1,
                             .keep_send_ns = 1, .idle_timeout_ns = idle_ns };
    cal_probe *p = NULL;
    assert_int_equal(cal_probe_open(&cfg, &p), CAL_OK);
    cal_request rq[4];
    for (size_t i = 0; i < n; i++) rq[i] = (cal_request){ .prompt = "x", .max_tokens = 302 };
    cal_load load = { .concurrency = (int)n };
    int64_t t0 = cal_now_ns();
    assert_int_equal(cal_probe_run(p, rq, n, &load, res, NULL, NULL, NULL, NULL), CAL_OK);
    *wall = cal_now_ns() - t0;
    cal_probe_close(&p);
}

static void test_deferred_interpretation(void **state)
{
    (void)state;
    int port = 0;
    pid_t srv = g_pace_server = pace_server_start(&port);
    assert_true(srv > 0);
    cal_req_result res[4];
    int64_t wall;

    /* Two text chunks, then 40 ms later a burst of 300 in one write (more
     * than may wait), finish, usage, [DONE]: every count and stamp is what
     * inline interpretation gives. */
    run_pace(port, "burst", 4, 2000000000LL, res, &wall);
    for (int i = 0; i < 4; i++) {
        cal_req_result *r = &res[i];
        assert_int_equal(r->status, CAL_REQ_OK);
        assert_int_equal(r->n_chunks, 302);           /* the role-only chunk is not one */
        assert_int_equal(r->output_tokens, 302);
        assert_int_equal(r->tok_source, CAL_TOKSRC_USAGE);
        assert_int_equal(r->prompt_tokens, 3);
        assert_true(r->first_token_ns == r->chunk_ns[0]);
        assert_true(r->last_token_ns == r->chunk_ns[301]);
        assert_true(r->first_byte_ns <= r->first_token_ns);
        /* each event keeps its own arrival, even though all were
         * interpreted later: the first two were read before the server sent
         * the burst (it waited for that), the burst after it */
        assert_true(r->chunk_send_ns[1] == -1 && r->chunk_send_ns[2] > 0);
        assert_true(r->chunk_ns[1] < r->chunk_send_ns[2]);
        assert_true(r->chunk_ns[2] >= r->chunk_send_ns[2]);
        for (int k = 1; k < 302; k++) assert_true(r->chunk_ns[k] >= r->chunk_ns[k - 1]);
        assert_true(r->last_token_ns <= r->end_ns);
        assert_non_null(r->text);
        assert_int_equal(strncmp(r->text, "a0 a1 b0 b1 ", 12), 0);
        assert_non_null(strstr(r->text, "b299 "));
        assert_null(r->error);
    }
    free_all(res, 4);

    /* An error event, then silence until the client hangs up: it ends the
     * request as stream_error at once (at the stamp of its bytes). Had the
     * event waited uninterpreted, only the idle timeout would end it, 30 s
     * on: half of that is a bound the test's own wait sets, not the
     * machine's speed. */
    const int64_t idle = 30000000000LL;
    run_pace(port, "errhang", 4, idle, res, &wall);
    int64_t t1 = cal_now_ns();
    assert_true(wall < idle / 2);
    for (int i = 0; i < 4; i++) {
        cal_req_result *r = &res[i];
        assert_int_equal(r->status, CAL_REQ_STREAM_ERROR);
        assert_non_null(r->error);
        assert_non_null(strstr(r->error, "engine crashed"));
        assert_int_equal(r->n_chunks, 2);
        assert_int_equal(r->output_tokens, 2);
        assert_true(r->end_ns >= r->last_token_ns && r->end_ns <= t1);
    }
    free_all(res, 4);
    kill(srv, SIGKILL);
    waitpid(srv, NULL, 0);
    g_pace_server = -1;
}


/* ---- deadlines, caps, fallbacks ------------------------------------------ */

static void test_limits_derived_from_max_tokens(void **state)
{
    (void)state;
    const int64_t S = 1000000000LL;
    /* defaults: 10 s connect + 60 s idle + 1 s a token */
    assert_true(cal_probe_request_timeout_ns(NULL, 64) == (10 + 60 + 64) * S);
    cal_probe_config cfg = { .connect_timeout_ns = 2 * S, .idle_timeout_ns = 3 * S };
    assert_true(cal_probe_request_timeout_ns(&cfg, 8) == (2 + 3 + 8) * S);
    assert_true(cal_probe_request_timeout_ns(&cfg, 0) == (2 + 3 + 4096) * S);    /* unsized */
    assert_true(cal_probe_request_timeout_ns(&cfg, -5) == (2 + 3 + 4096) * S);
    assert_true(cal_probe_request_timeout_ns(&cfg, 0x7fffffff) == (5 + 0x7fffffffLL) * S);
    cfg.idle_timeout_ns = INT64_MAX;                                  /* saturates */
    assert_true(cal_probe_request_timeout_ns(&cfg, 8) == INT64_MAX);
    cfg.request_timeout_ns = 1500000000;                              /* given: wins */
    assert_true(cal_probe_request_timeout_ns(&cfg, 8) == 1500000000);
    /* chunks: 4 x max_tokens + 256, 1 Mi unsized, 4 Mi at most */
    assert_int_equal(cal_probe_max_chunks(8), 288);
    assert_int_equal(cal_probe_max_chunks(1), 260);
    assert_int_equal(cal_probe_max_chunks(0), 1 << 20);
    assert_int_equal(cal_probe_max_chunks(1 << 20), 1 << 22);
    assert_int_equal(cal_probe_max_chunks(0x7fffffff), 1 << 22);
    /* a negative request timeout is refused */
    cal_probe *p = NULL;
    cal_probe_config bad = { .base_url = "http://127.0.0.1:1", .request_timeout_ns = -1 };
    assert_int_equal(cal_probe_open(&bad, &p), CAL_ERANGE);
    assert_null(p);
}

/* One content chunk, then ": ping" every 0.5 s forever: the comments keep
 * the idle timer from firing (5 s), so only the request deadline (1 s) ends
 * it, as a timeout that says so. The load deadline (60 s) only keeps a
 * broken probe from hanging the test: it would end them as cancelled. */
static void test_request_deadline_pings_forever(void **state)
{
    (void)state;
    cal_req_result res[2];
    g_request_timeout_ns = 1000000000LL;
    int64_t guard = cal_now_ns() + 60000000000LL;
    outcome o = run_mode("pingforever", CAL_API_CHAT, 2, 2, 0, 5000, res, NULL, guard, NULL, NULL, NULL);
    g_request_timeout_ns = 0;
    assert_int_equal(o.rc, CAL_OK);
    if (o.count[CAL_REQ_TIMEOUT] != 2)
        fail_msg("pingforever: %d of 2 timed out; first: %s (%s)", o.count[CAL_REQ_TIMEOUT],
                 cal_req_status_name(res[0].status), res[0].error ? res[0].error : "-");
    for (int i = 0; i < 2; i++) {
        assert_non_null(strstr(res[i].error, "request timeout 1000 ms"));
        assert_true(res[i].end_ns - res[i].send_ns >= 1000000000LL);
        assert_int_equal(res[i].n_chunks, 1);                  /* what came is kept */
        assert_true(res[i].first_token_ns > res[i].send_ns);
    }
    char line[512];
    assert_int_equal(cal_probe_failure_summary(&o.st, line, sizeof line), 2);
    assert_non_null(strstr(line, "2 timeout"));
    assert_non_null(strstr(line, "request timeout"));
    free_all(res, 2);
}

/* Content chunks as fast as the socket takes them, never ending: each
 * request ends as stream_error at cal_probe_max_chunks(8) = 288 chunks,
 * with exactly that many stamps kept, whether stamps are kept or not. */
static void test_chunk_cap_streams_forever(void **state)
{
    (void)state;
    for (int keep = 1; keep >= 0; keep--) {
        cal_req_result res[4];
        g_keep_chunks = keep;
        int64_t guard = cal_now_ns() + 60000000000LL;
        outcome o = run_mode("forever", keep ? CAL_API_COMPLETIONS : CAL_API_CHAT, 4, 2, 0, 5000,
                             res, NULL, guard, NULL, NULL, NULL);
        g_keep_chunks = 1;
        if (o.count[CAL_REQ_STREAM_ERROR] != 4)
            fail_msg("forever: %d of 4 stream_error; first: %s (%s), %d chunks",
                     o.count[CAL_REQ_STREAM_ERROR], cal_req_status_name(res[0].status),
                     res[0].error ? res[0].error : "-", res[0].n_chunks);
        for (int i = 0; i < 4; i++) {
            assert_non_null(strstr(res[i].error, "server sent more than asked"));
            assert_int_equal(res[i].n_chunks, cal_probe_max_chunks(8));
            assert_int_equal(res[i].output_tokens, cal_probe_max_chunks(8));
            if (keep) {
                assert_non_null(res[i].chunk_ns);
                assert_true(res[i].chunk_ns[287] == res[i].last_token_ns);
                assert_true(res[i].end_ns >= res[i].last_token_ns);
            } else {
                assert_null(res[i].chunk_ns);
            }
        }
        free_all(res, 4);
    }
}

/* CALIPER_PROBE_NO_PWAIT2=1: the probe meets ENOSYS from epoll_pwait2, as
 * on a kernel before 5.11, and waits with epoll_wait from then on. Streams,
 * idle timeouts and request deadlines still work, and the stats say which
 * call waited. */
static void test_epoll_wait_fallback(void **state)
{
    (void)state;
    assert_int_equal(setenv("CALIPER_PROBE_NO_PWAIT2", "1", 1), 0);
    cal_req_result res[6];
    outcome o = run_mode("normal", CAL_API_CHAT, 6, 3, 0, 2000, res, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o.count[CAL_REQ_OK], 6);
    assert_int_equal(o.st.wait_fallback, 1);
    for (int i = 0; i < 6; i++) assert_int_equal(res[i].n_chunks, 8);
    free_all(res, 6);
    o = run_mode("hang", CAL_API_COMPLETIONS, 2, 2, 0, 300, res, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o.count[CAL_REQ_TIMEOUT], 2);
    assert_int_equal(o.st.wait_fallback, 1);
    assert_non_null(strstr(res[0].error, "idle timeout"));
    free_all(res, 2);
    g_request_timeout_ns = 700000000LL;
    o = run_mode("pingforever", CAL_API_COMPLETIONS, 2, 2, 0, 5000, res, NULL,
                 cal_now_ns() + 60000000000LL, NULL, NULL, NULL);
    g_request_timeout_ns = 0;
    assert_int_equal(o.count[CAL_REQ_TIMEOUT], 2);
    assert_non_null(strstr(res[1].error, "request timeout 700 ms"));
    free_all(res, 2);
    assert_int_equal(unsetenv("CALIPER_PROBE_NO_PWAIT2"), 0);
    /* and without the variable, a probe on this kernel waits as it can */
    o = run_mode("normal", CAL_API_CHAT, 2, 2, 0, 2000, res, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o.count[CAL_REQ_OK], 2);
    free_all(res, 2);
}

/* --loops: the same workload on 1, 2 and 3 event loops gives the same
 * records in the same places (each result is its own request's: the echo
 * server returns the request, prompt included), the same counts, and per-loop
 * figures that add up to the run's. */
static void test_loops_merge_exactly(void **state)
{
    (void)state;
    enum { N = 23, CONC = 5 };
    cal_request rq[N];
    char prompts[N][32];
    for (int i = 0; i < N; i++) {
        snprintf(prompts[i], sizeof prompts[i], "prompt number %d.", i);
        rq[i] = (cal_request){ .prompt = prompts[i], .max_tokens = 8 };
    }
    const char *modes[] = { "echo", "normal", "errorevent" };
    int keep = g_loops;
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        cal_req_result base[N], res[N];
        g_loops = 1;
        outcome o1 = run_mode(modes[m], CAL_API_COMPLETIONS, N, CONC, 0, 2000, base, rq, 0,
                              NULL, NULL, NULL);
        assert_int_equal(o1.rc, CAL_OK);
        assert_int_equal(o1.st.n_loops, 1);
        for (int loops = 2; loops <= 3; loops++) {
            g_loops = loops;
            static ends e;
            memset(&e, 0, sizeof e);
            e.reqs = rq;
            e.n = N;
            g_ends = &e;
            outcome o = run_mode(modes[m], CAL_API_COMPLETIONS, N, CONC, 0, 2000, res, rq, 0,
                                 NULL, NULL, NULL);
            g_ends = NULL;
            assert_int_equal(o.rc, CAL_OK);
            /* each request's end named it once, by the caller's index, whichever
             * loop ran it (--keep-chunks frees that index's prompt) */
            assert_int_equal(atomic_load(&e.wrong), 0);
            for (int i = 0; i < N; i++) assert_int_equal(atomic_load(&e.calls[i]), 1);
            assert_int_equal(o.st.n_loops, loops);
            for (int k = 0; k < CAL_REQ_N_STATUS; k++)
                assert_int_equal(o.st.n_status[k], o1.st.n_status[k]);
            assert_int_equal(o.st.first_fail, o1.st.first_fail);
            /* events parsed: the same when every stream runs to its end (a
             * failed one stops where its read happened to stop) */
            if (o1.st.n_status[CAL_REQ_OK] == N) assert_int_equal(o.st.chunks, o1.st.chunks);
            int64_t reqs = 0, chunks = 0, cpu = 0;
            for (int k = 0; k < loops; k++) {
                assert_true(o.st.loop[k].requests > 0);
                reqs += o.st.loop[k].requests;
                chunks += o.st.loop[k].chunks;
                cpu += o.st.loop[k].cpu_ns;
            }
            assert_int_equal(reqs, N);
            assert_true(chunks == o.st.chunks);
            assert_true(cpu == o.st.cpu_ns);
            for (int i = 0; i < N; i++) {
                assert_int_equal(res[i].status, base[i].status);
                assert_int_equal(res[i].http_status, base[i].http_status);
                assert_int_equal(res[i].n_chunks, base[i].n_chunks);
                assert_int_equal(res[i].output_tokens, base[i].output_tokens);
                assert_int_equal(res[i].prompt_tokens, base[i].prompt_tokens);
                assert_int_equal(res[i].tok_source, base[i].tok_source);
                assert_true((res[i].error == NULL) == (base[i].error == NULL));
                if (res[i].error) assert_string_equal(res[i].error, base[i].error);
                assert_true((res[i].text == NULL) == (base[i].text == NULL));
                if (res[i].text) assert_string_equal(res[i].text, base[i].text);
                if (!strcmp(modes[m], "echo")) assert_non_null(strstr(res[i].text, prompts[i]));
                assert_true(res[i].send_ns >= res[i].sched_ns);
                assert_true(res[i].end_ns >= res[i].send_ns);
                if (res[i].n_chunks) {
                    assert_non_null(res[i].chunk_ns);
                    assert_true(res[i].chunk_ns[0] == res[i].first_token_ns);
                }
            }
            /* the progress line a caller shows: one summary naming each loop */
            char line[512];
            assert_int_equal(cal_probe_loops_summary(&o.st, line, sizeof line), o.st.saturated_loop);
            assert_non_null(strstr(line, loops == 2 ? "2 loops (" : "3 loops ("));
            assert_non_null(strstr(line, "loop 1:"));
            free_all(res, N);
        }
        free_all(base, N);
    }
    g_loops = keep;
}

/* The self-check line names each loop's share, CPU and lag, and the
 * saturated one. */
static void test_loops_summary_line(void **state)
{
    (void)state;
    cal_probe_stats st;
    memset(&st, 0, sizeof st);
    st.n_loops = 2;
    st.saturated_loop = 1;
    snprintf(st.loop_backend, sizeof st.loop_backend, "epoll");
    st.loop[0] = (cal_probe_loop_stats){ .requests = 10, .chunks = 80, .cpu_ns = 250000000,
                                         .wall_ns = 1000000000, .send_lag_p99_ms = 0.5 };
    st.loop[1] = (cal_probe_loop_stats){ .requests = 11, .chunks = 88, .cpu_ns = 970000000,
                                         .wall_ns = 1000000000, .send_lag_p99_ms = 7.25 };
    char line[512];
    assert_int_equal(cal_probe_loops_summary(&st, line, sizeof line), 1);
    assert_string_equal(line, "2 loops (epoll): loop 0: 10 requests, CPU 25 %, send lag p99 0.50 ms; "
                              "loop 1: 11 requests, CPU 97 %, send lag p99 7.25 ms; loop 1 saturated");
    st.saturated_loop = -1;
    assert_int_equal(cal_probe_loops_summary(&st, line, 20), -1);   /* cut, still a string */
    assert_int_equal(strlen(line), 19);
    assert_int_equal(cal_probe_loops_summary(&st, NULL, 0), -1);
}

/* CALIPER_LOOP picks the readiness backend; a name not built here is refused
 * at open, not at the first wait. */
static void test_loop_backend_choice(void **state)
{
    (void)state;
    const char *was = getenv("CALIPER_LOOP");
    char keep[16] = "";
    if (was) snprintf(keep, sizeof keep, "%s", was);
    cal_req_result res[4];
    assert_int_equal(setenv("CALIPER_LOOP", "poll", 1), 0);
    outcome o = run_mode("normal", CAL_API_CHAT, 4, 2, 0, 2000, res, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o.count[CAL_REQ_OK], 4);
    assert_string_equal(o.st.loop_backend, "poll");
    assert_int_equal(o.st.wait_fallback, 1);       /* poll() waits in whole ms */
    for (int i = 0; i < 4; i++) assert_int_equal(res[i].n_chunks, 8);
    free_all(res, 4);
    assert_int_equal(setenv("CALIPER_LOOP", "select", 1), 0);
    cal_probe_config cfg = { .base_url = "http://127.0.0.1:1", .api = CAL_API_COMPLETIONS };
    cal_probe *p = NULL;
    assert_int_equal(cal_probe_open(&cfg, &p), CAL_EINVAL);
    assert_null(p);
    assert_int_equal(unsetenv("CALIPER_LOOP"), 0);
    o = run_mode("normal", CAL_API_CHAT, 2, 2, 0, 2000, res, NULL, 0, NULL, NULL, NULL);
    assert_int_equal(o.count[CAL_REQ_OK], 2);
#if defined(CAL_PLATFORM_LINUX)
    assert_string_equal(o.st.loop_backend, "epoll");
#elif defined(CAL_PLATFORM_DARWIN)
    assert_string_equal(o.st.loop_backend, "kqueue");
#else
    assert_string_equal(o.st.loop_backend, "poll");
#endif
    free_all(res, 2);
    cfg.loops = -2;                                 /* -1 is CAL_PROBE_LOOPS_AUTO */
    assert_int_equal(cal_probe_open(&cfg, &p), CAL_ERANGE);
    cfg.loops = CAL_PROBE_LOOPS_AUTO;
    assert_int_equal(cal_probe_open(&cfg, &p), CAL_OK);
    cal_probe_close(&p);
    if (was) assert_int_equal(setenv("CALIPER_LOOP", keep, 1), 0);
    /* the default loop count is at least one and within the cap */
    int d = cal_probe_default_loops(0);
    assert_true(d >= 1 && d <= CAL_PROBE_MAX_LOOPS);
    assert_true(cal_probe_default_loops((int)getpid()) >= 1);
}

/* ---- every jansson allocation of a short run fails in turn --------------
 * The probe builds each request body and reads each event with jansson.
 * Failing its k-th allocation (k = 1, 2, ... until a run needs fewer) must
 * end the run in a clear state every time: cal_probe_open says CAL_ENOMEM,
 * or the run returns CAL_OK or CAL_ENOMEM with every request ok or
 * cancelled with a reason that names the probe, never a status that blames
 * the (well-behaved) server, never a body sent without its prompt; no crash,
 * no leak (the sanitizer builds run this too), and the slot list's
 * invariants (asserted inside the probe) hold. */
static long g_alloc_n, g_alloc_fail_at;
static void *failing_malloc(size_t n)
{
    if (g_alloc_fail_at && ++g_alloc_n == g_alloc_fail_at) return NULL;
    return malloc(n);
}

static void test_alloc_failures_walk(void **state)
{
    (void)state;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/keepalive", g_port);
    cal_probe_config cfg = { .base_url = url, .api = CAL_API_CHAT, .model = "m", .ignore_eos = 1,
                             .extra_body = "{\"temperature\":0.5}", .keep_chunks = 1,
                             .keep_text = 1, .idle_timeout_ns = 10000000000LL };
    cal_request rq[3] = { { .prompt = "one", .max_tokens = 8 }, { .prompt = "two", .max_tokens = 8 },
                          { .prompt = "three", .max_tokens = 8 } };
    cal_load one = { .concurrency = 1 };        /* each slot is reused */
    json_set_alloc_funcs(failing_malloc, free);
    long k, n_open_fail = 0, n_run_fail = 0, n_req_cancel = 0;
    for (k = 1; k < 20000; k++) {
        g_alloc_n = 0;
        g_alloc_fail_at = k;
        cal_probe *p = NULL;
        int rc = cal_probe_open(&cfg, &p);
        if (rc != CAL_OK) {
            g_alloc_fail_at = 0;
            if (rc != CAL_ENOMEM) fail_msg("allocation %ld: cal_probe_open gave %s", k, cal_strerror(rc));
            assert_null(p);
            n_open_fail++;
            continue;
        }
        cal_req_result res[3];
        rc = cal_probe_run(p, rq, 3, &one, res, NULL, NULL, NULL, NULL);
        long used = g_alloc_n;
        g_alloc_fail_at = 0;
        if (rc != CAL_OK && rc != CAL_ENOMEM) fail_msg("allocation %ld: run gave %s", k, cal_strerror(rc));
        n_run_fail += rc == CAL_ENOMEM;
        for (int i = 0; i < 3; i++) {
            if (res[i].status == CAL_REQ_OK) {
                assert_int_equal(res[i].n_chunks, 8);
                assert_string_equal(res[i].text, "tok0 tok1 tok2 tok3 tok4 tok5 tok6 tok7 ");
                continue;
            }
            if (res[i].status != CAL_REQ_CANCELLED)
                fail_msg("allocation %ld: request %d ended %s: %s", k, i,
                         cal_req_status_name(res[i].status), res[i].error ? res[i].error : "-");
            /* the message itself may not fit in memory; when it does, it names why */
            if (res[i].error && !strstr(res[i].error, "memory") && !strstr(res[i].error, "probe failure"))
                fail_msg("allocation %ld: request %d cancelled as \"%s\"", k, i, res[i].error);
            n_req_cancel++;
        }
        free_all(res, 3);
        cal_probe_close(&p);
        if (used < k) break;                     /* the run needed fewer: all walked */
    }
    json_set_alloc_funcs(malloc, free);
    assert_true(k < 20000);
    print_message("# %ld jansson allocations walked: %ld failed open, %ld failed runs, "
                  "%ld requests cancelled\n", k - 1, n_open_fail, n_run_fail, n_req_cancel);
    assert_true(n_open_fail > 0 && n_run_fail + n_req_cancel > 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", argv[0]);
    snprintf(g_bindir, sizeof g_bindir, "%s", dirname(tmp));
    /* tests/e2e/test_probe_loops.sh runs this suite again on other loops */
    const char *lp = getenv("CALIPER_TEST_PROBE_LOOPS");
    g_loops = lp ? atoi(lp) : 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normal_completions_and_chat),
        cmocka_unit_test(test_drip_feed_parses),
        cmocka_unit_test(test_faults),
        cmocka_unit_test(test_http_errors_keep_status_and_body),
        cmocka_unit_test(test_json_and_llama_timings),
        cmocka_unit_test(test_connection_refused),
        cmocka_unit_test(test_request_body),
        cmocka_unit_test(test_request_body_reuse),
        cmocka_unit_test(test_open_loop_poisson),
        cmocka_unit_test(test_stop_and_deadline),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_many_streams),
        cmocka_unit_test(test_deferred_interpretation),
        cmocka_unit_test(test_limits_derived_from_max_tokens),
        cmocka_unit_test(test_request_deadline_pings_forever),
        cmocka_unit_test(test_chunk_cap_streams_forever),
        cmocka_unit_test(test_epoll_wait_fallback),
        cmocka_unit_test(test_loops_merge_exactly),
        cmocka_unit_test(test_loops_summary_line),
        cmocka_unit_test(test_loop_backend_choice),
        cmocka_unit_test(test_alloc_failures_walk),
        cmocka_unit_test(test_handle_reset_after_retry_only),
        cmocka_unit_test(test_against_caliper_serve),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
