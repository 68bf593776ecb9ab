/* Slow and silent HTTP clients against one loopback port, to check that a
 * server cannot be locked out by them. Opens SILENT sockets that send
 * nothing, TRICKLE sockets that send a request line and then one header
 * line every EVERY_MS (never the blank line that ends the head), and BODY
 * sockets that send a whole head announcing a 1 MB body and then one body
 * byte every EVERY_MS. Prints "ready" on stdout once every socket is
 * connected, then waits until the server has closed each one (end of file
 * or a reset), at most BOUND_S seconds (a hang detector), and prints one
 * line per kind: how many were closed and how long the slowest and quickest
 * lived. Exit 0 when every socket was closed, 1 otherwise, 2 on misuse.
 *
 * usage: slowclients PORT SILENT TRICKLE BODY EVERY_MS BOUND_S */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { K_SILENT, K_TRICKLE, K_BODY, K_N };
static const char *const KIND[K_N] = {"silent", "trickle", "body"};

typedef struct sock {
    int    fd;
    int    kind;
    int    open;
    double t_open, t_closed;   /* s, CLOCK_MONOTONIC */
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
    if (argc != 7) {
        fprintf(stderr, "usage: slowclients PORT SILENT TRICKLE BODY EVERY_MS BOUND_S\n");
        return 2;
    }
    int port = atoi(argv[1]);
    int want[K_N] = {atoi(argv[2]), atoi(argv[3]), atoi(argv[4])};
    double every = atof(argv[5]) / 1000.0, bound = atof(argv[6]);
    int n = want[0] + want[1] + want[2];
    if (port <= 0 || n <= 0 || every <= 0 || bound <= 0) {
        fprintf(stderr, "slowclients: bad arguments\n");
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
        s[i].kind = i < want[0] ? K_SILENT : i < want[0] + want[1] ? K_TRICKLE : K_BODY;
        s[i].fd = socket(AF_INET, SOCK_STREAM, 0);
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
    }
    printf("ready\n");
    fflush(stdout);
    double t0 = now_s(), next = t0 + every;
    int left = n;
    while (left > 0 && now_s() - t0 < bound) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (s[i].open) pf[m++] = (struct pollfd){.fd = s[i].fd, .events = POLLIN};
        int wait_ms = (int)((next - now_s()) * 1000);
        poll(pf, (nfds_t)m, wait_ms < 0 ? 0 : wait_ms);
        double t = now_s();
        for (int i = 0, j = 0; i < n; i++) {
            if (!s[i].open) continue;
            struct pollfd *p = &pf[j++];
            if (!(p->revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char b[4096];
            ssize_t r = recv(s[i].fd, b, sizeof b, 0);
            if (r > 0) continue;            /* an answer: the close follows */
            if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            s[i].open = 0;
            s[i].t_closed = t;
            close(s[i].fd);
            left--;
        }
        if (t < next) continue;
        next = t + every;
        for (int i = 0; i < n; i++) {
            if (!s[i].open || s[i].kind == K_SILENT) continue;
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
