/* bench/probe — the probe's timestamp accuracy and CPU cost against a pacing
 * server, each beside a floor measured in the same run by a minimal epoll
 * reader (raw sockets, no HTTP library, no JSON). Error = client receive
 * stamp − the server's CLOCK_MONOTONIC send_ns carried in each chunk. The
 * probe runs twice per repetition, on the build's loop backend (epoll here)
 * and on poll() (CALIPER_LOOP=poll), interleaved with the floor, so each
 * ratio to the floor is taken side by side. With more than 2 CPUs it then
 * scans the event loops (1, 2, 4 ... up to the CPUs left beside the pacer)
 * at the largest level, against the same pacer.
 *
 *   bench/probe [--quick] [--seconds S] [--chunks K] [--url URL]
 *   bench/probe --prepare [--caliper PATH] [--levels 64,1024,2048]
 *
 * --prepare measures what exact prompts cost before the first request:
 * against `caliper serve --preset tiny --pace-ms 20` (its /tokenize, no
 * model compute), 3 unique exact 256-token prompts per stream are built
 * by construction, timed (wall, this process's CPU), then sent at that
 * many streams; the probe window's CPU per chunk is printed beside the
 * whole process's (preparation included). At the first level the same
 * prompts are also built counting every prompt, for the ratio.
 *
 * The pacer is built in (a forked single-threaded epoll + timerfd + min-heap
 * process, Connection: close streams, send_ns read just before send()), so
 * both clients meet the same server; --url points both at another pacing
 * server instead (e.g. `caliper serve --pace-ms N`, whose pace then rules). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/probe.h"
#include "caliper/stats.h"
#include "caliper/workload.h"
#include "caliper/workload_traffic.h"
#include <libgen.h>

#define MAX_FD 16384

/* ---- the pacer (child process) ------------------------------------------ */

typedef struct { int64_t due; int fd; uint32_t gen; int k; } hent;
typedef struct { uint32_t gen; int open, streaming; char *hdr; size_t hlen; size_t body_left; } pconn;

static hent  *g_heap;
static size_t g_hn, g_hcap;
static pconn  g_pc[MAX_FD];

static void heap_push(hent e)
{
    if (g_hn == g_hcap) {
        g_hcap = g_hcap ? g_hcap * 2 : 4096;
        g_heap = realloc(g_heap, g_hcap * sizeof *g_heap);
        if (!g_heap) _exit(3);
    }
    size_t i = g_hn++;
    while (i && g_heap[(i - 1) / 2].due > e.due) { g_heap[i] = g_heap[(i - 1) / 2]; i = (i - 1) / 2; }
    g_heap[i] = e;
}

static hent heap_pop(void)
{
    hent top = g_heap[0], last = g_heap[--g_hn];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= g_hn) break;
        if (c + 1 < g_hn && g_heap[c + 1].due < g_heap[c].due) c++;
        if (g_heap[c].due >= last.due) break;
        g_heap[i] = g_heap[c];
        i = c;
    }
    if (g_hn) g_heap[i] = last;
    return top;
}

static void pconn_close(int epfd, int fd)
{
    epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    g_pc[fd].open = 0;
    g_pc[fd].gen++;
    free(g_pc[fd].hdr);
    g_pc[fd].hdr = NULL;
}

static void arm(int tfd)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (g_hn) {
        int64_t d = g_heap[0].due;
        if (d <= 0) d = 1;
        its.it_value.tv_sec = d / 1000000000;
        its.it_value.tv_nsec = d % 1000000000;
    }
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* Serve until SIGTERM; then write "late_p50 late_p99 late_max short_sends
 * chunks" (ms) to outfd and exit. */
static void pacer_main(int lfd, int outfd, int64_t pace_ns, int chunks)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGTERM);
    sigprocmask(SIG_BLOCK, &ss, NULL);
    int sfd = signalfd(-1, &ss, SFD_CLOEXEC);
    int epfd = epoll_create1(0);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    struct epoll_event ev = { .events = EPOLLIN };
    ev.data.fd = lfd; epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
    ev.data.fd = tfd; epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &ev);
    ev.data.fd = sfd; epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &ev);
    size_t lcap = 1 << 22, ln = 0;
    double *late = malloc(lcap * sizeof *late);
    long short_sends = 0, sent_chunks = 0;
    static const char hdr[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                              "Cache-Control: no-cache\r\nConnection: close\r\n\r\n";
    struct epoll_event evs[512];
    for (;;) {
        int n = epoll_wait(epfd, evs, 512, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == sfd) {
                double p50 = NAN, p99 = NAN, mx = NAN;
                if (ln) {
                    cal_stats_sort(late, ln);
                    p50 = cal_stats_percentile_sorted(late, ln, 50);
                    p99 = cal_stats_percentile_sorted(late, ln, 99);
                    mx = late[ln - 1];
                }
                dprintf(outfd, "%.4f %.4f %.4f %ld %ld\n", p50, p99, mx, short_sends, sent_chunks);
                _exit(0);
            } else if (fd == lfd) {
                int c;
                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    if (c >= MAX_FD) { close(c); continue; }
                    int one = 1;
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    g_pc[c].open = 1; g_pc[c].streaming = 0; g_pc[c].hlen = 0;
                    g_pc[c].body_left = (size_t)-1;
                    g_pc[c].hdr = malloc(8192);
                    struct epoll_event ce = { .events = EPOLLIN, .data.fd = c };
                    epoll_ctl(epfd, EPOLL_CTL_ADD, c, &ce);
                }
            } else if (fd == tfd) {
                uint64_t x;
                if (read(tfd, &x, sizeof x) < 0) {}
                int64_t now = cal_now_ns();
                while (g_hn && g_heap[0].due <= now) {
                    hent e = heap_pop();
                    if (!g_pc[e.fd].open || g_pc[e.fd].gen != e.gen) continue;
                    int last = e.k == chunks - 1;
                    char buf[512];
                    int64_t send_ns = cal_now_ns();
                    int len = snprintf(buf, sizeof buf,
                        "data: {\"id\":\"cmpl-pace\",\"object\":\"text_completion\",\"created\":0,"
                        "\"model\":\"pace\",\"choices\":[{\"index\":0,\"text\":\" tok\",\"logprobs\":null,"
                        "\"finish_reason\":%s}],\"send_ns\":%lld}\n\n%s",
                        last ? "\"length\"" : "null", (long long)send_ns, last ? "data: [DONE]\n\n" : "");
                    ssize_t w = send(e.fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
                    if (w < 0 && errno != EAGAIN) { pconn_close(epfd, e.fd); continue; }
                    if (w != len) short_sends++;
                    sent_chunks++;
                    if (ln < lcap) late[ln++] = (double)(send_ns - e.due) / 1e6;
                    if (last) pconn_close(epfd, e.fd);
                    else heap_push((hent){ e.due + pace_ns, e.fd, e.gen, e.k + 1 });
                    now = cal_now_ns();
                }
                arm(tfd);
            } else {
                pconn *pc = &g_pc[fd];
                char tmp[16384];
                ssize_t r = recv(fd, tmp, sizeof tmp, 0);
                if (r <= 0) { if (r == 0 || errno != EAGAIN) pconn_close(epfd, fd); continue; }
                if (pc->streaming) continue;
                if (pc->body_left == (size_t)-1) {
                    size_t take = (size_t)r < 8191 - pc->hlen ? (size_t)r : 8191 - pc->hlen;
                    memcpy(pc->hdr + pc->hlen, tmp, take);
                    pc->hlen += take;
                    pc->hdr[pc->hlen] = '\0';
                    char *end = strstr(pc->hdr, "\r\n\r\n");
                    if (!end) { if (pc->hlen >= 8191) pconn_close(epfd, fd); continue; }
                    char *cl = strcasestr(pc->hdr, "\r\nContent-Length:");
                    size_t clen = cl ? strtoul(cl + 17, NULL, 10) : 0;
                    size_t got = pc->hlen - (size_t)(end + 4 - pc->hdr) + ((size_t)r - take);
                    pc->body_left = clen > got ? clen - got : 0;
                } else {
                    pc->body_left = (size_t)r >= pc->body_left ? 0 : pc->body_left - (size_t)r;
                }
                if (pc->body_left == 0) {             /* request complete: start the stream */
                    pc->streaming = 1;
                    if (send(fd, hdr, sizeof hdr - 1, MSG_NOSIGNAL) < 0) { pconn_close(epfd, fd); continue; }
                    int64_t arrival = cal_now_ns();
                    int was_empty = g_hn == 0 || arrival + pace_ns < g_heap[0].due;
                    heap_push((hent){ arrival + pace_ns, fd, pc->gen, 0 });
                    if (was_empty) arm(tfd);
                }
            }
        }
    }
}

typedef struct pacer { pid_t pid; int port; int outfd; } pacer;

/* Time this thread spent runnable but waiting for a CPU (ns), from
 * /proc/thread-self/schedstat; -1 where the kernel does not say. On a shared
 * host this is what separates a slow client from a starved one. */
static int64_t runqueue_wait_ns(void)
{
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    long long run = 0, wait = -1;
    if (f) {
        if (fscanf(f, "%lld %lld", &run, &wait) != 2) wait = -1;
        fclose(f);
    }
    return wait;
}

/* This thread's user and system CPU time so far (µs), for the verbose split. */
static void thread_times(double *user_us, double *sys_us)
{
    struct rusage ru;
    *user_us = *sys_us = 0;
    if (getrusage(RUSAGE_THREAD, &ru) != 0) return;
    *user_us = (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec;
    *sys_us = (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec;
}

static int g_pin = 1;
/* pid on CPUs [cpu, cpu + n) */
static void pin_range(pid_t pid, int cpu, int n)
{
    if (!g_pin || sysconf(_SC_NPROCESSORS_ONLN) < 2) return;
    cpu_set_t s;
    CPU_ZERO(&s);
    for (int k = 0; k < n; k++) CPU_SET(cpu + k, &s);
    sched_setaffinity(pid, sizeof s, &s);
}
static void pin(pid_t pid, int cpu) { pin_range(pid, cpu, 1); }

static int pacer_start(pacer *pc, int64_t pace_ns, int chunks)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 4096)
        || getsockname(lfd, (struct sockaddr *)&a, &al)) return -1;
    int p[2];
    if (pipe(p)) return -1;
    pid_t pid = fork();
    if (pid == 0) { close(p[0]); pin(0, 0); pacer_main(lfd, p[1], pace_ns, chunks); _exit(0); }
    close(p[1]);
    close(lfd);
    pc->pid = pid;
    pc->port = ntohs(a.sin_port);
    pc->outfd = p[0];
    return 0;
}

static void pacer_stop(pacer *pc, double late[3], long *short_sends)
{
    kill(pc->pid, SIGTERM);
    char buf[256] = "";
    ssize_t r = read(pc->outfd, buf, sizeof buf - 1);
    buf[r > 0 ? r : 0] = '\0';
    long chunks = 0;
    late[0] = late[1] = late[2] = NAN;
    *short_sends = 0;
    sscanf(buf, "%lf %lf %lf %ld %ld", &late[0], &late[1], &late[2], short_sends, &chunks);
    close(pc->outfd);
    waitpid(pc->pid, NULL, 0);
}

/* ---- measurements -------------------------------------------------------- */

typedef struct samples {
    double *err_ms;             /* receive − send */
    int64_t *send_ns;
    size_t n, cap;
} samples;

static void add(samples *s, int64_t recv, int64_t send)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 65536;
        s->err_ms = realloc(s->err_ms, s->cap * sizeof *s->err_ms);
        s->send_ns = realloc(s->send_ns, s->cap * sizeof *s->send_ns);
        if (!s->err_ms || !s->send_ns) { fprintf(stderr, "out of memory\n"); exit(1); }
    }
    s->err_ms[s->n] = (double)(recv - send) / 1e6;
    s->send_ns[s->n++] = send;
}

typedef struct result {
    double p50, p99, max, cpu_us, chunks_s, early_p50, late_p50;
    double first_p99;           /* the first wave's send − sched p99 (ms); NAN: floor */
    size_t chunks;
    int errors;
    int sent, resets;           /* the probe's requests sent, and its curl handles
                                   reset between them (cal_probe_stats) */
} result;

static void summarize(samples *s, int64_t t0, int64_t dur_ns, int64_t cpu_ns, result *r)
{
    memset(r, 0, sizeof *r);
    r->chunks = s->n;
    r->chunks_s = (double)s->n / ((double)dur_ns / 1e9);
    r->cpu_us = s->n ? (double)cpu_ns / 1e3 / (double)s->n : NAN;
    /* backlog check: median error of chunks sent in the first vs last third */
    double *a = malloc((s->n + 1) * sizeof *a), *b = malloc((s->n + 1) * sizeof *b);
    size_t na = 0, nb = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->send_ns[i] < t0 + dur_ns / 3) a[na++] = s->err_ms[i];
        else if (s->send_ns[i] >= t0 + 2 * dur_ns / 3) b[nb++] = s->err_ms[i];
    }
    r->early_p50 = cal_stats_median(a, na);
    r->late_p50 = cal_stats_median(b, nb);
    free(a); free(b);
    cal_stats_sort(s->err_ms, s->n);
    r->p50 = cal_stats_percentile_sorted(s->err_ms, s->n, 50);
    r->p99 = cal_stats_percentile_sorted(s->err_ms, s->n, 99);
    r->max = s->n ? s->err_ms[s->n - 1] : NAN;
}

static char g_body[4096];
static char g_request[8192];
static size_t g_request_len;

static void build_request(const char *host, int port, const char *path_prefix)
{
    cal_buf pr = CAL_BUF_INIT(2048);
    for (int i = 0; pr.len < 300; i++) cal_buf_printf(&pr, "word%d ", i);
    snprintf(g_body, sizeof g_body, "{\"model\":\"pace\",\"prompt\":\"%s\",\"max_tokens\":64,"
             "\"stream\":true,\"stream_options\":{\"include_usage\":true}}", pr.data);
    g_request_len = (size_t)snprintf(g_request, sizeof g_request,
        "POST %s/v1/completions HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
        "Accept: text/event-stream\r\nContent-Length: %zu\r\n\r\n%s",
        path_prefix, host, port, strlen(g_body), g_body);
    cal_buf_free(&pr);
}

/* The floor: c raw connections on one epoll set; a request ends at EOF or
 * "[DONE]", then the connection is replaced. Stamp right after read(). */
typedef struct fconn { int fd; size_t len; char buf[8192]; } fconn;

static int floor_connect(int epfd, struct sockaddr_in *a, fconn *fc)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)a, sizeof *a) != 0
        || send(fd, g_request, g_request_len, MSG_NOSIGNAL) != (ssize_t)g_request_len) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    fc->fd = fd;
    fc->len = 0;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = fc };
    epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
    return 0;
}

/* Both clients start their first wave spread evenly over one pace period
 * (stream i at t0 + i·pace/conc), so their streams have the same phases:
 * neither meets a pacer whose every stream ticks at the same instant. */
static void run_floor(int port, int conc, int64_t dur_ns, int64_t pace_ns, samples *s,
                      int64_t *cpu_ns, int *errors)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)port) };
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    fconn *fc = calloc((size_t)conc, sizeof *fc);
    int64_t cpu0 = cal_thread_cpu_ns(), t0 = cal_now_ns(), end = t0 + dur_ns;
    *errors = 0;
    int started = 0;
    for (int i = 0; i < conc; i++) fc[i].fd = -1;
    static const char key[] = "\"send_ns\":";
    struct epoll_event evs[512];
    for (;;) {
        int64_t now = cal_now_ns();
        if (now >= end) break;
        while (started < conc && t0 + started * pace_ns / conc <= now) {
            if (floor_connect(epfd, &a, &fc[started])) (*errors)++;
            started++;
        }
        int64_t wake = started < conc ? t0 + started * pace_ns / conc : end;
        int n = epoll_wait(epfd, evs, 512, (int)((wake - now + 999999) / 1000000));
        for (int i = 0; i < n; i++) {
            fconn *c = evs[i].data.ptr;
            ssize_t r = read(c->fd, c->buf + c->len, sizeof c->buf - 1 - c->len);
            int64_t t = cal_now_ns();
            if (r < 0 && errno == EAGAIN) continue;
            int done = r <= 0;
            if (r > 0) {
                c->len += (size_t)r;
                c->buf[c->len] = '\0';
                char *p = c->buf, *keep = NULL, *k;
                while ((k = strstr(p, key))) {
                    char *d = k + sizeof key - 1, *q = d;
                    while (*q >= '0' && *q <= '9') q++;
                    if (*q == '\0') { keep = k; break; }  /* digits may go on */
                    add(s, t, strtoll(d, NULL, 10));
                    p = q;
                }
                if (strstr(p, "[DONE]")) done = 1;
                if (!keep) {                  /* keep what may start a key */
                    size_t rem = strlen(p);
                    keep = rem > 16 ? p + rem - 16 : p;
                }
                size_t tail = strlen(keep);
                memmove(c->buf, keep, tail);
                c->len = tail;
            }
            if (done) {
                epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                if (cal_now_ns() < end && floor_connect(epfd, &a, c)) (*errors)++;
            }
        }
    }
    *cpu_ns = cal_thread_cpu_ns() - cpu0;
    for (int i = 0; i < conc; i++) if (fc[i].fd >= 0) close(fc[i].fd);
    close(epfd);
    free(fc);
}

/* backend: CALIPER_LOOP for this run (NULL: as the environment says); the
 * backend used is written to used[8]. */
static void run_probe(const char *url, int conc, int64_t dur_ns, int64_t pace_ns, int chunks,
                      const char *backend, int loops, char used[8],
                      samples *s, int64_t *cpu_ns, int *errors, int64_t *start_ns, double *first_p99,
                      int *sent, int *resets)
{
    cal_probe_config cfg = { .base_url = url, .api = CAL_API_COMPLETIONS, .model = "pace",
                             .keep_send_ns = 1, .keep_chunks = 1, .loops = loops,
                             .idle_timeout_ns = 10000000000LL };
    cal_probe *p = NULL;
    char *was = getenv("CALIPER_LOOP") ? strdup(getenv("CALIPER_LOOP")) : NULL;
    if (backend) setenv("CALIPER_LOOP", backend, 1);
    int orc = cal_probe_open(&cfg, &p);
    if (backend) { if (was) setenv("CALIPER_LOOP", was, 1); else unsetenv("CALIPER_LOOP"); }
    free(was);
    if (orc) { fprintf(stderr, "probe: cannot open: %s\n", cal_strerror(orc)); exit(1); }
    size_t per = (size_t)(dur_ns / (pace_ns * chunks)) + 2;
    size_t n = (size_t)conc * per;
    cal_request *rq = calloc(n, sizeof *rq);
    cal_req_result *res = calloc(n, sizeof *res);
    const char *prompt = strstr(g_body, "word0");   /* the same prompt as the floor's */
    char *pr = strndup(prompt, (size_t)(strchr(prompt, '"') - prompt));
    for (size_t i = 0; i < n; i++) rq[i] = (cal_request){ .prompt = pr, .max_tokens = chunks };
    /* from the run's start: bodies built and connections opened before it,
     * as the floor's first stream is due at its start */
    for (int i = 0; i < conc && (size_t)i < n; i++) rq[i].sched_ns = i * pace_ns / conc;
    cal_load load = { .concurrency = conc, .deadline_ns = dur_ns, .from_start = 1 };
    cal_probe_stats st;
    int rc = cal_probe_run(p, rq, n, &load, res, NULL, NULL, NULL, &st);
    if (rc) fprintf(stderr, "probe: run: %s\n", cal_strerror(rc));
    *errors = 0;
    *sent = 0;
    *resets = st.handle_resets;
    for (size_t i = 0; i < n; i++) {
        *sent += res[i].send_ns > 0;
        if (res[i].status != CAL_REQ_OK && res[i].status != CAL_REQ_CANCELLED && (*errors)++ == 0)
            fprintf(stderr, "probe: request %zu: %s: %s\n", i, cal_req_status_name(res[i].status),
                    res[i].error ? res[i].error : "-");
        int kept = res[i].n_chunks;
        for (int k = 0; k < kept && res[i].chunk_send_ns; k++)
            if (res[i].chunk_send_ns[k] > 0) add(s, res[i].chunk_ns[k], res[i].chunk_send_ns[k]);
        cal_req_result_free(&res[i]);
    }
    *cpu_ns = st.cpu_ns;
    *start_ns = st.start_ns;
    *first_p99 = st.first_lag_p99_ms;
    if (getenv("BENCH_PROBE_VERBOSE"))
        fprintf(stderr, "probe: prepared in %.1f ms, %d connections opened ahead, %d used; first "
                "wave of %d: send lag p50 %.3f p99 %.3f ms\n", (double)st.prepare_ns / 1e6,
                st.connected_ahead, st.used_ahead, st.first_wave, st.first_lag_p50_ms,
                st.first_lag_p99_ms);
    snprintf(used, 8, "%s", st.loop_backend);
    if (st.n_loops > 1 || getenv("BENCH_PROBE_VERBOSE")) {
        char ls[2048];
        cal_probe_loops_summary(&st, ls, sizeof ls);
        fprintf(stderr, "probe: %s\n", ls);
    }
    if (getenv("BENCH_PROBE_VERBOSE")) {
        double fb[3] = { 0, 0, 0 };             /* first byte after send: p50, p99, max (ms) */
        double *d = malloc(n * sizeof *d);
        size_t nd = 0;
        for (size_t i = 0; i < n; i++)
            if (res[i].first_byte_ns && res[i].send_ns) d[nd++] = (double)(res[i].first_byte_ns - res[i].send_ns) / 1e6;
        if (nd) {
            cal_stats_sort(d, nd);
            fb[0] = cal_stats_percentile_sorted(d, nd, 50);
            fb[1] = cal_stats_percentile_sorted(d, nd, 99);
            fb[2] = d[nd - 1];
        }
        /* send lag of the opening wave (one request per stream) and of the rest */
        double lw[3] = { 0, 0, 0 }, lr[3] = { 0, 0, 0 };
        for (int part = 0; part < 2; part++) {
            nd = 0;
            for (size_t i = part ? (size_t)conc : 0; i < (part ? n : (size_t)conc) && i < n; i++)
                if (res[i].send_ns && res[i].sched_ns) d[nd++] = (double)(res[i].send_ns - res[i].sched_ns) / 1e6;
            double *o = part ? lr : lw;
            if (nd) {
                cal_stats_sort(d, nd);
                o[0] = cal_stats_percentile_sorted(d, nd, 50);
                o[1] = cal_stats_percentile_sorted(d, nd, 99);
                o[2] = d[nd - 1];
            }
        }
        fprintf(stderr, "probe: send lag, opening wave p50 %.3f p99 %.3f max %.3f ms; later requests "
                "p50 %.3f p99 %.3f max %.3f ms\n", lw[0], lw[1], lw[2], lr[0], lr[1], lr[2]);
        free(d);
        fprintf(stderr, "probe: %zu requests, max in flight %d, send lag p50 %.3f p99 %.3f max %.3f ms, "
                "first byte after send p50 %.3f p99 %.3f max %.3f ms, %lld events\n", n, st.max_in_flight,
                st.send_lag_p50_ms, st.send_lag_p99_ms, st.send_lag_max_ms, fb[0], fb[1], fb[2],
                (long long)st.chunks);
    }
    free(pr); free(rq); free(res);
    cal_probe_close(&p);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench/probe [--quick] [--seconds S] [--chunks K] [--levels 1,64,512,2048]\n"
               "       bench/probe --prepare [--caliper PATH] [--levels 64,1024,2048]\n"
               "                   [--reps N (3; 1 with --quick)] [--loops N (1)]\n"
               "                   [--url URL --pace-ms N] [--only floor|probe|poll] [--nice N]\n"
               "                   [--no-poll] [--scan-loops | --no-scan (default: scan with > 2 CPUs)]\n"
               "                   [--no-pin (default: pacer on CPU 0, clients on CPU 1)]\n");
}

/* One client's run against a fresh pacer (or --url): prints its row, and
 * returns its figures in r. which: 0 floor, 1 probe, 2 probe on poll(). */
typedef struct bench_cfg {
    const char *url;
    int ext_pace_ms, chunks;
    double seconds;
} bench_cfg;

static int one_run(const bench_cfg *b, int which, int conc, int pace_ms, int loops, result *r)
{
    int64_t pace_ns = (int64_t)pace_ms * 1000000, dur = (int64_t)(b->seconds * 1e9);
    pacer pc = { 0 };
    char base[128];
    int port, err = 0;
    if (b->url) {
        snprintf(base, sizeof base, "%s", b->url);
        const char *c = strrchr(b->url, ':');
        port = c ? atoi(c + 1) : 80;
    } else {
        if (pacer_start(&pc, pace_ns, b->chunks)) { perror("pacer"); exit(1); }
        port = pc.port;
        snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    }
    build_request("127.0.0.1", port, "");
    samples s = { 0 };
    double late[3] = { NAN, NAN, NAN };
    char used[8] = "floor";
    int64_t cpu = 0, t0 = cal_now_ns(), rq0 = runqueue_wait_ns();
    double u0, s0, u1, s1;
    thread_times(&u0, &s0);
    int64_t start = 0;
    double first_p99 = NAN;
    int sent = 0, resets = 0;
    if (which == 0) run_floor(port, conc, dur, pace_ns, &s, &cpu, &err);
    else run_probe(base, conc, dur, pace_ns, b->chunks, which == 2 ? "poll" : NULL, loops, used,
                   &s, &cpu, &err, &start, &first_p99, &sent, &resets);
    thread_times(&u1, &s1);
    int64_t rq1 = runqueue_wait_ns(), wall = cal_now_ns() - t0;
    if (getenv("BENCH_PROBE_VERBOSE") && s.n)
        fprintf(stderr, "%s: user %.2f, system %.2f µs per chunk (this thread, whole run)\n",
                which == 0 ? "floor" : "probe", (u1 - u0) / (double)s.n, (s1 - s0) / (double)s.n);
    double starved = rq0 >= 0 && rq1 >= 0 ? 100.0 * (double)(rq1 - rq0) / (double)wall : NAN;
    summarize(&s, start > t0 ? start : t0, dur, cpu, r);   /* thirds from the first send */
    r->sent = sent;
    r->resets = resets;
    r->first_p99 = first_p99;
    free(s.err_ms); free(s.send_ns);
    long shorts = 0;
    if (!b->url) pacer_stop(&pc, late, &shorts);
    double nominal = (double)conc * 1000.0 / pace_ms;
    char label[24];
    if (which == 0) snprintf(label, sizeof label, "floor");
    else if (loops > 1) snprintf(label, sizeof label, "%.5s×%d", used, loops);
    else snprintf(label, sizeof label, "%s", used);
    printf("%-6d %3dms %-8s %10.0f %10.0f %8.3f %8.3f %8.2f %9.2f %9.3f %7.3f %15.3f %7.0f%%%s\n",
           conc, pace_ms, label, r->chunks_s, nominal,
           r->p50, r->p99, r->max, r->cpu_us, r->early_p50, r->late_p50, late[1], starved,
           err ? "  (errors)" : "");
    fflush(stdout);
    return err;
}

/* ---- --prepare: exact prompts before the first request ------------------- */

static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

/* `caliper serve --preset tiny --pace-ms pace_ms --port 0`: its URL in url. */
static pid_t serve_start(const char *caliper, int pace_ms, char *url, size_t n)
{
    int p[2];
    if (pipe(p)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], 1);
        close(p[0]);
        char pace[16];
        snprintf(pace, sizeof pace, "%d", pace_ms);
        execl(caliper, caliper, "serve", "--preset", "tiny", "--pace-ms", pace, "--port", "0",
              "--max-connections", "8192", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char line[512] = "";
    size_t k = 0;
    while (k + 1 < sizeof line && read(p[0], line + k, 1) == 1 && line[k] != '\n') k++;
    line[k] = '\0';
    close(p[0]);
    const char *u = strstr(line, "http://");
    if (!u) { kill(pid, SIGTERM); waitpid(pid, NULL, 0); return -1; }
    size_t l = strcspn(u, " )");
    snprintf(url, n, "%.*s", (int)(l < n ? l : n - 1), u);
    return pid;
}

/* n exact prompts of want tokens (per_prompt: counted one by one). */
static int prepare(cal_http_tokenizer *tk, int want, size_t n, int per_prompt, char **out,
                   int *calls, const char **note)
{
    cal_workload_config wc = { .content = CAL_CONTENT_PROSE, .prompt_tokens = want, .unique = 1,
                               .seed = 20261130, .count = cal_http_tokenizer_count,
                               .count_many = cal_http_tokenizer_count_many,
                               .token_ids = cal_http_tokenizer_ids, .count_ud = tk,
                               .per_prompt = per_prompt };
    cal_workload *w;
    int rc = cal_workload_open(&wc, &w);
    if (!rc) rc = cal_workload_prepare(w, 0, n);
    for (size_t i = 0; !rc && i < n; i++) rc = cal_workload_prompt(w, i, &out[i], NULL);
    if (!rc && !cal_workload_exact(w)) rc = CAL_ERANGE;
    *calls = cal_workload_count_calls(w);
    static char nb[300];
    snprintf(nb, sizeof nb, "%s", cal_workload_note(w) ? cal_workload_note(w) : "");
    *note = nb;
    cal_workload_close(&w);
    return rc;
}

static int run_prepare(const char *caliper, const int *levels, int nlev, int chunks)
{
    const int pace_ms = 20, want = 256, per_stream = 3;
    char url[256];
    pid_t sp = serve_start(caliper, pace_ms, url, sizeof url);
    if (sp < 0) { fprintf(stderr, "bench/probe: cannot start %s serve\n", caliper); return 1; }
    cal_http_tokenizer *tk;
    if (cal_http_tokenizer_open(url, NULL, NULL, 0, &tk)) { kill(sp, SIGTERM); return 1; }
    printf("bench/probe --prepare: %d-token exact unique prompts, %d per stream, against %s "
           "(caliper serve --preset tiny --pace-ms %d); %d chunks per request\n",
           want, per_stream, url, pace_ms, chunks);
    printf("%-6s %8s %9s %11s %9s %7s %13s %13s %8s\n", "conc", "prompts", "prep s", "prompts/s",
           "ms CPU/p", "calls", "window µs/ch", "process µs/ch", "ratio");
    int rc_exit = 0;
    double base_rate = NAN;
    for (int li = 0; li < nlev; li++) {
        int conc = levels[li];
        size_t n = (size_t)conc * per_stream;
        char **pr = calloc(n, sizeof *pr);
        int calls = 0;
        const char *note = "";
        /* at the first level, the old way beside it: every prompt counted */
        if (li == 0) {
            double c0 = self_cpu_s();
            int64_t t0 = cal_now_ns();
            int rc = prepare(tk, want, n, 1, pr, &calls, &note);
            double wall = (double)(cal_now_ns() - t0) / 1e9, cpu = self_cpu_s() - c0;
            base_rate = (double)n / wall;
            printf("%-6d %8zu %9.3f %11.0f %9.3f %7d %13s %13s %8s  every prompt counted%s%s\n",
                   conc, n, wall, base_rate, cpu * 1e3 / (double)n, calls, "-", "-", "-",
                   rc ? ": " : "", rc ? cal_strerror(rc) : "");
            for (size_t i = 0; i < n; i++) { free(pr[i]); pr[i] = NULL; }
        }
        double c0 = self_cpu_s();
        int64_t t0 = cal_now_ns();
        int rc = prepare(tk, want, n, 0, pr, &calls, &note);
        double wall = (double)(cal_now_ns() - t0) / 1e9, cpu = self_cpu_s() - c0;
        if (rc) {
            fprintf(stderr, "bench/probe: preparing %zu prompts: %s\n", n, cal_strerror(rc));
            rc_exit = 1;
            break;
        }
        /* send them: conc streams, per_stream requests each */
        cal_probe_config cfg = { .base_url = url, .api = CAL_API_COMPLETIONS, .loops = 1,
                                 .idle_timeout_ns = 30000000000LL };
        cal_probe *p = NULL;
        cal_request *rq = calloc(n, sizeof *rq);
        cal_req_result *res = calloc(n, sizeof *res);
        for (size_t i = 0; i < n; i++) rq[i] = (cal_request){ .prompt = pr[i], .max_tokens = chunks };
        cal_load load = { .concurrency = conc };
        cal_probe_stats st;
        memset(&st, 0, sizeof st);
        int orc = cal_probe_open(&cfg, &p);
        if (!orc) orc = cal_probe_run(p, rq, n, &load, res, NULL, NULL, NULL, &st);
        double cpu_all = self_cpu_s() - c0;
        long long got = 0;
        int errors = 0;
        for (size_t i = 0; i < n; i++) {
            got += res[i].n_chunks;
            errors += res[i].status != CAL_REQ_OK;
            cal_req_result_free(&res[i]);
        }
        double win = got ? (double)st.cpu_ns / 1e3 / (double)got : NAN;
        double all = got ? cpu_all * 1e6 / (double)got : NAN;
        printf("%-6d %8zu %9.3f %11.0f %9.4f %7d %13.2f %13.2f %7.2fx  built%s%s%s\n", conc, n,
               wall, (double)n / wall, cpu * 1e3 / (double)n, calls, win, all, all / win,
               errors || orc ? " (errors)" : "", note[0] ? ": " : "", note);
        if (li == 0)
            printf("%-6d prompts/s built ÷ counted one by one: %.1fx\n", conc,
                   ((double)n / wall) / base_rate);
        if (errors || orc) rc_exit = 1;
        fflush(stdout);
        cal_probe_close(&p);
        for (size_t i = 0; i < n; i++) free(pr[i]);
        free(pr); free(rq); free(res);
    }
    /* the chat scenario: 64 users x 16 turns over the notes' system block */
    {
        cal_chat_config cc = { .users = 64, .turns = 16, .system_tokens = CAL_CHAT_SYSTEM_TOKENS,
                               .user_tokens = { .kind = CAL_LEN_FIXED, .n = 64 },
                               .answer_tokens = { .kind = CAL_LEN_FIXED, .n = 64 },
                               .think_ms = { .kind = CAL_LEN_FIXED, .n = 0 },
                               .content = CAL_CONTENT_PROSE, .seed = 3,
                               .count = cal_http_tokenizer_count, .count_ud = tk };
        char why[300] = "";
        cal_traffic *tr = NULL;
        double c0 = self_cpu_s();
        int64_t t0 = cal_now_ns();
        int rc = cal_chat_build(&cc, &tr, why, sizeof why);
        double wall = (double)(cal_now_ns() - t0) / 1e9, cpu = self_cpu_s() - c0;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("chat 64 users x 16 turns, %d-token system block: prepared in %.3f s (CPU %.3f s), "
               "last prompt %d tokens, peak RSS %ld MiB%s%s\n", CAL_CHAT_SYSTEM_TOKENS, wall, cpu,
               tr ? cal_traffic_turn(tr, 15, 0)->prompt_tokens : -1, ru.ru_maxrss / 1024,
               rc ? ": " : "", rc ? why : "");
        if (rc) rc_exit = 1;
        cal_traffic_free(&tr);
    }
    cal_http_tokenizer_close(&tk);
    kill(sp, SIGTERM);
    waitpid(sp, NULL, 0);
    return rc_exit;
}

int main(int argc, char **argv)
{
    double seconds = 4;
    int chunks = 64, quick = 0;
    const char *url = NULL;
    int ext_pace_ms = 0, only = -1, reps = 0, nice_inc = 0, loops = 1, poll_too = 1, scan = -1;
    int levels[8] = { 1, 64, 512, 2048 }, nlev = 4, prep = 0, levels_given = 0;
    const char *caliper = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--prepare")) prep = 1;
        else if (!strcmp(argv[i], "--caliper") && i + 1 < argc) caliper = argv[++i];
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--chunks") && i + 1 < argc) chunks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--url") && i + 1 < argc) url = argv[++i];
        else if (!strcmp(argv[i], "--pace-ms") && i + 1 < argc) ext_pace_ms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--nice") && i + 1 < argc) nice_inc = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--loops") && i + 1 < argc) loops = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-poll")) poll_too = 0;
        else if (!strcmp(argv[i], "--scan-loops")) scan = 1;
        else if (!strcmp(argv[i], "--no-scan")) scan = 0;
        else if (!strcmp(argv[i], "--no-pin")) g_pin = 0;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            i++;
            only = !strcmp(argv[i], "probe") ? 1 : !strcmp(argv[i], "poll") ? 2 : 0;
        } else if (!strcmp(argv[i], "--levels") && i + 1 < argc) {
            nlev = 0;
            levels_given = 1;
            for (char *t = strtok(argv[++i], ","); t && nlev < 8; t = strtok(NULL, ","))
                levels[nlev++] = atoi(t);
        } else if (!strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else { fprintf(stderr, "bench/probe: unknown argument \"%s\"\n", argv[i]); usage(stderr); return 2; }
    }
    if (quick) { seconds = 1.5; chunks = 32; }
    if (reps <= 0) reps = quick ? 1 : 3;
    if (reps > 16) reps = 16;
    if (seconds <= 0 || chunks < 2 || nlev == 0 || (url && ext_pace_ms <= 0)
        || loops < 1 || loops > CAL_PROBE_MAX_LOOPS) { usage(stderr); return 2; }
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max < 16384 ? rl.rlim_max : 16384;
    setrlimit(RLIMIT_NOFILE, &rl);
    signal(SIGPIPE, SIG_IGN);
    if (prep) {
        /* the caliper binary beside build/bench/: build/caliper */
        char def[4096];
        if (!caliper) {
            char *d = strdup(argv[0]);
            snprintf(def, sizeof def, "%s/../caliper", dirname(d));
            free(d);
            caliper = def;
        }
        static const int prep_levels[3] = { 64, 1024, 2048 };
        return run_prepare(caliper, levels_given ? levels : prep_levels, levels_given ? nlev : 3,
                           quick ? 8 : 16);
    }
    /* a shared host: --nice -10 lifts pacer and both clients alike */
    if (nice_inc && setpriority(PRIO_PROCESS, 0, nice_inc) != 0) perror("bench/probe: --nice");
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* clients beside the pacer: CPU 1 alone, or CPUs 1.. for several loops */
    int client_cpus = loops > 1 && ncpu > 2 ? (int)(ncpu - 1 < loops ? ncpu - 1 : loops) : 1;
    pin_range(0, 1, client_cpus);
    bench_cfg bc = { url, ext_pace_ms, chunks, seconds };
    double la[3] = { NAN, NAN, NAN };
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf) { if (fscanf(lf, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = NAN; fclose(lf); }

    printf("bench/probe: receive − send per chunk (ms), client CPU per chunk; %s, %.1f s per run, "
           "%d chunks per request; %ld CPUs, load average %.2f %.2f %.2f\n",
           url ? url : "built-in pacer (Connection: close)", seconds, chunks, ncpu, la[0], la[1], la[2]);
    printf("%-6s %5s %-8s %10s %10s %8s %8s %8s %9s %9s %7s %15s %8s\n", "conc", "pace", "client",
           "chunks/s", "nominal", "p50", "p99", "max", "µs/chunk", "p50 1st⅓", "last⅓", "pacer late p99",
           "starved");
    int rc_exit = 0;
    int nclients = poll_too ? 3 : 2;
    for (int li = 0; li < nlev; li++) {
        int conc = levels[li];
        int pace_ms = url ? ext_pace_ms : conc >= 2048 ? 40 : 20;
        /* per client, each repetition's p50, p99, CPU, chunks/s, backlog */
        double m[3][6][16];
        int nm[3] = { 0, 0, 0 };
        double rat_lo = INFINITY, rat_hi = -INFINITY, cpu_floor = NAN;   /* per rep */
        long sent = 0, resets = 0;
        for (int rep = 0; rep < reps; rep++) {
            for (int which = 0; which < nclients; which++) {   /* floor, probe, poll: interleaved */
                if (only >= 0 && which != only) continue;
                result r;
                if (one_run(&bc, which, conc, pace_ms, loops, &r)) rc_exit = 1;
                int k = nm[which]++;
                m[which][0][k] = r.p50;
                m[which][1][k] = r.p99;
                m[which][2][k] = r.cpu_us;
                m[which][3][k] = r.chunks_s;
                m[which][4][k] = r.late_p50 - r.early_p50;
                m[which][5][k] = r.first_p99;
                if (which == 0) cpu_floor = r.cpu_us;
                if (which == 1) {
                    double q = r.cpu_us / cpu_floor;   /* beside the floor just before it */
                    if (q < rat_lo) rat_lo = q;
                    if (q > rat_hi) rat_hi = q;
                    sent += r.sent;
                    resets += r.resets;
                }
            }
        }
        if (only >= 0) continue;
        double md[3][6];
        for (int w = 0; w < nclients; w++)
            for (int q = 0; q < 6; q++) md[w][q] = cal_stats_median(m[w][q], (size_t)nm[w]);
        printf("%-6d median of %d: p50 %.3f / %.3f ms, p99 %.3f / %.3f ms, CPU %.2f / %.2f us "
               "(probe / floor): p99 %.2fx, CPU/chunk %.2fx, chunks/s %.3fx; probe backlog "
               "growth %+.1f ms (floor %+.1f)%s\n",
               conc, reps, md[1][0], md[0][0], md[1][1], md[0][1], md[1][2], md[0][2],
               md[1][1] / md[0][1], md[1][2] / md[0][2], md[1][3] / md[0][3], md[1][4], md[0][4],
               md[1][3] >= 0.98 * md[0][3] && md[1][4] < 5 + pace_ms / 2.0 ? ": keeps up" : ": FALLS BEHIND");
        printf("%-6d caliper chunks/s ÷ floor: %.3f; first wave send lag p99 %.3f ms (median of %d)\n",
               conc, md[1][3] / md[0][3], md[1][5], reps);
        /* The median ratio above mixes two noisy medians; each repetition's
         * ratio shows the spread a change must exceed. A curl handle reset
         * after every request (4,400 instructions) would show here first. */
        if (rat_lo <= rat_hi)
            printf("%-6d CPU/chunk ÷ floor per repetition %.2f–%.2fx; ", conc, rat_lo, rat_hi);
        else
            printf("%-6d CPU/chunk ÷ floor per repetition: none (a client received no chunk); ", conc);
        printf("curl handles reset after %ld of %ld requests\n", resets, sent);
        if (poll_too)
            printf("%-6d median of %d, poll(): p99 %.3f ms (%.2fx the floor), CPU %.2f us (%.2fx), "
                   "chunks/s %.3fx, backlog growth %+.1f ms%s\n",
                   conc, reps, md[2][1], md[2][1] / md[0][1], md[2][2], md[2][2] / md[0][2],
                   md[2][3] / md[0][3], md[2][4],
                   md[2][3] >= 0.98 * md[0][3] && md[2][4] < 5 + pace_ms / 2.0 ? ": keeps up" : ": FALLS BEHIND");
        fflush(stdout);
    }
    /* loops against the same pacer: 1, 2, 4 ... on CPUs 1.. (the pacer keeps CPU 0) */
    if (scan < 0) scan = ncpu > 2 && only < 0;
    if (scan) {
        int conc = levels[nlev - 1];
        int pace_ms = url ? ext_pace_ms : conc >= 2048 ? 40 : 20;
        int maxl = ncpu > 2 ? (int)ncpu - 1 : 1;
        printf("loops at %d streams × %d ms (clients on CPUs 1-%d, pacer on CPU 0):\n", conc, pace_ms, maxl);
        pin_range(0, 1, maxl);
        double base = NAN;
        for (int l = 1; l <= maxl && l <= CAL_PROBE_MAX_LOOPS; l = l * 2 <= maxl || l == maxl ? l * 2 : maxl) {
            result r;
            if (one_run(&bc, 1, conc, pace_ms, l, &r)) rc_exit = 1;
            if (l == 1) base = r.chunks_s;
            printf("%-6d loops %2d: chunks/s %.0f (%.2fx one loop), p99 %.3f ms, CPU %.2f us/chunk\n",
                   conc, l, r.chunks_s, r.chunks_s / base, r.p99, r.cpu_us);
            fflush(stdout);
        }
    }
    return rc_exit;
}
