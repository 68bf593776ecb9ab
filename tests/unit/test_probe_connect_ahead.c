/* Connections opened ahead (cal_probe_config.no_connect_ahead = 0, the
 * default): a loopback server in a thread counts the connections it has
 * accepted when the run's first request arrives. The other requests of the
 * first wave are due an hour later and the server stops the run once it has
 * counted, so the count says what the probe opened before its first send,
 * whatever the machine's speed. Also: the first wave's send lag is reported,
 * and keep-alive connections opened ahead are reused (no more connections
 * than slots). */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/probe.h"

#define MAXC 64

typedef struct server {
    int lfd, port;
    int accepted;               /* connections accepted so far */
    int at_first;               /* ... when the first request had arrived; -1 */
    int requests;               /* requests answered */
    int stop_after;             /* set *stop after this many answers (0: never) */
    volatile int *stop;
    atomic_int quit;
    pthread_t th;
    struct { int fd; size_t len; char buf[8192]; } c[MAXC];
    int nc;
} server;

static void accept_all(server *s)
{
    int fd;
    while ((fd = accept(s->lfd, NULL, NULL)) >= 0) {
        s->accepted++;
        if (s->nc == MAXC) { close(fd); continue; }
        s->c[s->nc].fd = fd;
        s->c[s->nc].len = 0;
        s->nc++;
    }
}

/* A complete request in b[0..len): its length, else 0. */
static size_t request_len(const char *b, size_t len)
{
    const char *end = memmem(b, len, "\r\n\r\n", 4);
    if (!end) return 0;
    size_t head = (size_t)(end + 4 - b), body = 0;
    const char *cl = strcasestr(b, "\r\nContent-Length:");
    if (cl && cl < end) body = strtoul(cl + 17, NULL, 10);
    return len >= head + body ? head + body : 0;
}

static void *serve(void *arg)
{
    server *s = arg;
    static const char ev[] =
        "data: {\"choices\":[{\"index\":0,\"text\":\" x\",\"finish_reason\":\"length\"}],"
        "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n";
    char reply[512];
    int rl = snprintf(reply, sizeof reply, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      "Content-Length: %zu\r\n\r\n%s", sizeof ev - 1, ev);
    while (!atomic_load(&s->quit)) {
        struct pollfd pf[MAXC + 1];
        pf[0] = (struct pollfd){ .fd = s->lfd, .events = POLLIN };
        for (int i = 0; i < s->nc; i++) pf[i + 1] = (struct pollfd){ .fd = s->c[i].fd, .events = POLLIN };
        if (poll(pf, (nfds_t)s->nc + 1, 50) <= 0) continue;
        if (pf[0].revents) accept_all(s);
        for (int i = 0; i < s->nc; i++) {
            if (!pf[i + 1].revents || s->c[i].fd < 0) continue;
            ssize_t r = recv(s->c[i].fd, s->c[i].buf + s->c[i].len, sizeof s->c[i].buf - 1 - s->c[i].len, 0);
            if (r <= 0) { close(s->c[i].fd); s->c[i].fd = -1; continue; }
            s->c[i].len += (size_t)r;
            size_t q;
            while ((q = request_len(s->c[i].buf, s->c[i].len)) > 0) {
                if (s->at_first < 0) {          /* every connection made by now */
                    accept_all(s);
                    s->at_first = s->accepted;
                }
                memmove(s->c[i].buf, s->c[i].buf + q, s->c[i].len - q);
                s->c[i].len -= q;
                if (send(s->c[i].fd, reply, (size_t)rl, MSG_NOSIGNAL) != rl) break;
                if (++s->requests == s->stop_after && s->stop) *s->stop = 1;
            }
        }
        int k = 0;                              /* drop the closed */
        for (int i = 0; i < s->nc; i++) if (s->c[i].fd >= 0) s->c[k++] = s->c[i];
        s->nc = k;
    }
    for (int i = 0; i < s->nc; i++) close(s->c[i].fd);
    return NULL;
}

static void server_start(server *s, int stop_after, volatile int *stop)
{
    memset(s, 0, sizeof *s);
    s->at_first = -1;
    s->stop_after = stop_after;
    s->stop = stop;
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(s->lfd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(s->lfd, 64), 0);
    assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &al), 0);
    s->port = ntohs(a.sin_port);
    atomic_init(&s->quit, 0);
    assert_int_equal(pthread_create(&s->th, NULL, serve, s), 0);
}

static void server_stop(server *s)
{
    atomic_store(&s->quit, 1);
    pthread_join(s->th, NULL);
    close(s->lfd);
}

/* conc slots, request 0 due at once and the others an hour on; the server
 * stops the run after answering request 0. */
static void first_request(int no_ahead, server *s, cal_probe_stats *st)
{
    enum { CONC = 6 };
    volatile int stop = 0;
    server_start(s, 1, &stop);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    cal_probe_config cfg = { .base_url = url, .api = CAL_API_COMPLETIONS, .model = "m",
                             .connect_timeout_ns = 10000000000LL, .no_connect_ahead = no_ahead };
    cal_probe *p = NULL;
    assert_int_equal(cal_probe_open(&cfg, &p), CAL_OK);
    cal_request rq[CONC];
    cal_req_result res[CONC];
    int64_t later = cal_now_ns() + 3600LL * 1000000000;
    for (int i = 0; i < CONC; i++)
        rq[i] = (cal_request){ .prompt = "hello", .max_tokens = 1, .sched_ns = i ? later : 0 };
    cal_load load = { .concurrency = CONC };
    int rc = cal_probe_run(p, rq, CONC, &load, res, &stop, NULL, NULL, st);
    assert_int_equal(rc, CAL_ECANCEL);           /* the server stopped it */
    assert_true(res[0].send_ns > 0);            /* sent (it may end cancelled: the stop
                                                   can come before its reply is read) */
    for (int i = 1; i < CONC; i++) {
        assert_int_equal(res[i].status, CAL_REQ_CANCELLED);
        assert_true(res[i].send_ns == 0);       /* never sent */
    }
    for (int i = 0; i < CONC; i++) cal_req_result_free(&res[i]);
    cal_probe_close(&p);
    server_stop(s);
}

static void test_connections_open_before_first_send(void **state)
{
    (void)state;
    server s;
    cal_probe_stats st;
    first_request(0, &s, &st);
    /* every slot's connection was there when the first request came */
    assert_int_equal(s.at_first, 6);
    assert_int_equal(s.accepted, 6);
    assert_int_equal(st.connected_ahead, 6);
    assert_int_equal(st.used_ahead, 1);         /* request 0 went out on one */
    assert_true(st.start_ns > 0);
    assert_true(st.prepare_ns >= 0);
    /* the first wave's send lag: of the one request of it that was sent */
    assert_int_equal(st.first_wave, 6);
    assert_true(isfinite(st.first_lag_p50_ms) && st.first_lag_p50_ms >= 0);
    assert_true(isfinite(st.first_lag_p99_ms) && st.first_lag_p99_ms >= st.first_lag_p50_ms);

    /* told not to: one connection, made for the one request sent */
    first_request(1, &s, &st);
    assert_int_equal(s.at_first, 1);
    assert_int_equal(st.connected_ahead, 0);
    assert_int_equal(st.used_ahead, 0);
    assert_true(isfinite(st.first_lag_p99_ms));
}

/* Keep-alive: 3 slots, 12 requests; the connections opened ahead carry
 * them all (libcurl reuses them), so the server sees 3 connections. */
static void test_connections_ahead_are_reused(void **state)
{
    (void)state;
    enum { CONC = 3, N = 12 };
    server s;
    server_start(&s, 0, NULL);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    cal_probe_config cfg = { .base_url = url, .api = CAL_API_COMPLETIONS, .model = "m" };
    cal_probe *p = NULL;
    assert_int_equal(cal_probe_open(&cfg, &p), CAL_OK);
    cal_request rq[N];
    cal_req_result res[N];
    for (int i = 0; i < N; i++) rq[i] = (cal_request){ .prompt = "hello", .max_tokens = 1 };
    cal_load load = { .concurrency = CONC };
    cal_probe_stats st;
    assert_int_equal(cal_probe_run(p, rq, N, &load, res, NULL, NULL, NULL, &st), CAL_OK);
    for (int i = 0; i < N; i++) {
        assert_int_equal(res[i].status, CAL_REQ_OK);
        cal_req_result_free(&res[i]);
    }
    assert_int_equal(st.connected_ahead, CONC);
    assert_int_equal(st.used_ahead, CONC);
    assert_int_equal(st.first_wave, CONC);
    assert_true(isfinite(st.first_lag_p99_ms));
    cal_probe_close(&p);
    server_stop(&s);
    assert_int_equal(s.accepted, CONC);
    assert_int_equal(s.requests, N);
}

/* from_start: the times count from the run's start, after the opening. */
static void test_times_from_start(void **state)
{
    (void)state;
    server s;
    server_start(&s, 0, NULL);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    cal_probe_config cfg = { .base_url = url, .api = CAL_API_COMPLETIONS, .model = "m" };
    cal_probe *p = NULL;
    assert_int_equal(cal_probe_open(&cfg, &p), CAL_OK);
    cal_request rq[2] = { { .prompt = "a", .max_tokens = 1, .sched_ns = 0 },
                          { .prompt = "b", .max_tokens = 1, .sched_ns = 1000000 } };
    cal_req_result res[2];
    cal_load load = { .concurrency = 2, .from_start = 1 };
    cal_probe_stats st;
    assert_int_equal(cal_probe_run(p, rq, 2, &load, res, NULL, NULL, NULL, &st), CAL_OK);
    assert_int_equal(res[0].sched_ns, st.start_ns);
    assert_int_equal(res[1].sched_ns, st.start_ns + 1000000);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(res[i].status, CAL_REQ_OK);
        assert_true(res[i].send_ns >= res[i].sched_ns);
        cal_req_result_free(&res[i]);
    }
    cal_probe_close(&p);
    server_stop(&s);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connections_open_before_first_send),
        cmocka_unit_test(test_connections_ahead_are_reused),
        cmocka_unit_test(test_times_from_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
