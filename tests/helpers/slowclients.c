/* Slow and silent HTTP clients against one loopback port, to check that a
 * server cannot be locked out by them. Opens SILENT sockets that send
 * nothing, TRICKLE sockets that send a request line and then one header
 * line every EVERY_MS (never the blank line that ends the head), and BODY
 * sockets that send a whole head announcing a 1 MB body and then one body
 * byte every EVERY_MS, and STALL sockets that send one whole request (POST
 * PATH with the JSON BODY, for a long stream) and never read the reply: a
 * small receive buffer fills and the server's bytes back up. Prints "ready"
 * on stdout once every socket is connected and every STALL socket has
 * stalled (its receive queue holds bytes and has not grown for 0.5 s, so
 * the server has bytes it cannot send), then waits until the server has
 * closed each one (end of file or a reset; a STALL socket, which reads
 * nothing, sees only a reset), at most BOUND_S seconds (a hang detector),
 * and prints one line per kind: how many were closed and how long the
 * slowest and quickest lived. Exit 0 when every socket was closed, 1
 * otherwise, 2 on misuse.
 *
 * usage: slowclients PORT SILENT TRICKLE BODY EVERY_MS BOUND_S [STALL PATH BODY] */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { K_SILENT, K_TRICKLE, K_BODY, K_STALL, K_N };
static const char *const KIND[K_N] = {"silent", "trickle", "body", "stall"};
#define STALL_QUIET_S 0.5   /* a receive queue unchanged this long: stalled */
#ifdef POLLRDHUP
#define STALL_EVENTS POLLRDHUP   /* the server's end of file, unread bytes or not */
#else
#define STALL_EVENTS 0
#endif

typedef struct sock {
    int    fd;
    int    kind;
    int    open;
    double t_open, t_closed;   /* s, CLOCK_MONOTONIC */
    int    queued;             /* STALL: bytes in the receive queue at t_queued */
    double t_queued;           /* ... when that count last changed */
} sock;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int send_str(int fd, const char *s)
{
    size_t n = strlen(s);
    ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
    return w == (ssize_t)n ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 7 && argc != 10) {
        fprintf(stderr, "usage: slowclients PORT SILENT TRICKLE BODY EVERY_MS BOUND_S [STALL PATH BODY]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    int want[K_N] = {atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argc == 10 ? atoi(argv[7]) : 0};
    double every = atof(argv[5]) / 1000.0, bound = atof(argv[6]);
    int n = want[0] + want[1] + want[2] + want[3];
    if (port <= 0 || n <= 0 || every <= 0 || bound <= 0 || want[3] < 0) {
        fprintf(stderr, "slowclients: bad arguments\n");
        return 2;
    }
    char stall_req[8192] = "";
    if (want[K_STALL] &&
        snprintf(stall_req, sizeof stall_req, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                 argv[8], strlen(argv[9]), argv[9]) >= (int)sizeof stall_req) {
        fprintf(stderr, "slowclients: the STALL request is too long\n");
        return 2;
    }
    struct rlimit rl;                       /* one descriptor per socket */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    sock *s = calloc((size_t)n, sizeof *s);
    struct pollfd *pf = calloc((size_t)n, sizeof *pf);
    if (!s || !pf) return 2;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    for (int i = 0; i < n; i++) {
        s[i].kind = i < want[0] ? K_SILENT : i < want[0] + want[1] ? K_TRICKLE
                  : i < want[0] + want[1] + want[2] ? K_BODY : K_STALL;
        s[i].fd = socket(AF_INET, SOCK_STREAM, 0);
        if (s[i].fd >= 0 && s[i].kind == K_STALL) {   /* before connect: the window */
            int rb = 4096;
            setsockopt(s[i].fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof rb);
        }
        if (s[i].fd < 0 || connect(s[i].fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            fprintf(stderr, "slowclients: socket %d of %d: %s\n", i + 1, n, strerror(errno));
            free(s);
            free(pf);
            return 2;
        }
        s[i].open = 1;
        s[i].t_open = now_s();
        /* the first line at once: a server that times out silence alone
         * would otherwise look like one that enforces a deadline */
        if (s[i].kind == K_TRICKLE)
            send_str(s[i].fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        else if (s[i].kind == K_BODY)
            send_str(s[i].fd, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{");
        else if (s[i].kind == K_STALL)
            send_str(s[i].fd, stall_req);
    }
    double t0 = now_s(), next = t0 + every;
    int left = n, ready = 0;
    while (left > 0 && now_s() - t0 < bound) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (s[i].open)   /* a STALL socket reads nothing: it waits for a reset, or
                                for a close before any reply came */
                pf[m++] = (struct pollfd){.fd = s[i].fd,
                                          .events = s[i].kind == K_STALL ? STALL_EVENTS : POLLIN};
        int wait_ms = (int)((next - now_s()) * 1000);
        if (!ready && wait_ms > 50) wait_ms = 50;
        poll(pf, (nfds_t)m, wait_ms < 0 ? 0 : wait_ms);
        double t = now_s();
        int stalled = 1;
        for (int i = 0, j = 0; i < n; i++) {
            if (!s[i].open) continue;
            struct pollfd *p = &pf[j++];
            if (s[i].kind == K_STALL && !(p->revents & (POLLHUP | POLLERR | STALL_EVENTS))) {
                int q = 0;
                if (ioctl(s[i].fd, FIONREAD, &q) == 0 && q != s[i].queued) {
                    s[i].queued = q;
                    s[i].t_queued = t;
                }
                if (s[i].queued == 0 || t - s[i].t_queued < STALL_QUIET_S) stalled = 0;
                continue;
            }
            if (!(p->revents & (POLLIN | POLLHUP | POLLERR | STALL_EVENTS))) continue;
            char b[4096];
            ssize_t r = recv(s[i].fd, b, sizeof b, 0);
            if (r > 0) continue;            /* an answer: the close follows */
            if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            s[i].open = 0;
            s[i].t_closed = t;
            close(s[i].fd);
            left--;
        }
        if (!ready && stalled) {
            printf("ready\n");
            fflush(stdout);
            ready = 1;
        }
        if (t < next) continue;
        next = t + every;
        for (int i = 0; i < n; i++) {
            if (!s[i].open || s[i].kind == K_SILENT || s[i].kind == K_STALL) continue;
            /* a failed send is the server's close; the read above sees it */
            send_str(s[i].fd, s[i].kind == K_TRICKLE ? "X-Slow: 1\r\n" : "1");
        }
    }
    for (int k = 0; k < K_N; k++) {
        if (!want[k]) continue;
        int closed = 0;
        double lo = -1, hi = -1;
        for (int i = 0; i < n; i++) {
            if (s[i].kind != k || s[i].open) continue;
            double life = s[i].t_closed - s[i].t_open;
            if (lo < 0 || life < lo) lo = life;
            if (life > hi) hi = life;
            closed++;
        }
        printf("%s %d closed of %d, lived %.3f to %.3f s\n", KIND[k], closed, want[k],
               lo < 0 ? 0 : lo, hi < 0 ? 0 : hi);
    }
    free(s);
    free(pf);
    return left == 0 ? 0 : 1;
}
