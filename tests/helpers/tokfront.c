/* A front whose /tokenize and usage disagree on purpose, over a real
 * loopback socket: the server's own tokenizer is one token per byte of the
 * prompt, and the first path segment picks what /tokenize says and what
 * usage reports (MODES below). It also answers a chat scenario as a server
 * with a prefix cache would: the longest byte prefix of a prompt it saw
 * before is "cached", reported (or not), and only the rest costs prefill
 * time. Prints "port N" once listening; ends with its parent (or SIGTERM).
 * One thread per connection; every answer closes its connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *MODES =
    "honest     /tokenize counts one token a byte; usage.prompt_tokens the same\n"
    "double     /tokenize says twice the count (and a tokens array that long)\n"
    "plus1      /tokenize says one more than the count (off by one)\n"
    "short3     /tokenize's tokens array is 3 short\n"
    "nousage    honest /tokenize; the stream carries no usage at all\n"
    "bos        a server that adds a BOS: /tokenize adds it with add_special, usage counts it\n"
    "noempty    honest; a chat request with an empty message is refused (400)\n"
    "tokfail    /tokenize answers 500: a tokenizer that fails (usage is honest)\n"
    "cache      a prefix cache: usage.prompt_tokens_details.cached_tokens reports its hit,\n"
    "           and prefill sleeps 40 us for each token not cached\n"
    "cachellama the same hit as llama.cpp reports it: timings.cache_n\n"
    "cachequiet the same cache and prefill time, its hit reported nowhere\n"
    "wallK[-tag] a paced stream whose chunks come 10 ms apart for its first K completions,\n"
    "           then 20 ms apart: a wall that halves the per-request speed (one counter\n"
    "           per mode name, so each tag is a fresh engine)\n"
    "neg, huge, frac, string, cachedneg, cachedbig\n"
    "           hostile usage: prompt_tokens -5, 1e12, 63.5 or \"64\"; cached_tokens -3 or\n"
    "           more than the prompt\n"
    "Chat completions count the message plus a 7-token template (an empty message: 7).\n";

#define TEMPLATE_TOKENS 7
#define OUT_TOKENS 4
#define BODY_MAX (8u << 20)
#define CACHE_SLOTS 256

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_seen[CACHE_SLOTS];   /* prompts served, for the prefix cache */
static size_t g_nseen;
#define WALL_MODES 64
static struct { char mode[64]; long served; } g_wall[WALL_MODES];   /* completions per wall mode */

/* A wall mode's gap between chunks for its next completion, µs (0: not a
 * wall mode): 10 ms for its first K, then 20 ms. */
static long wall_gap_us(const char *mode)
{
    long k;
    if (strncmp(mode, "wall", 4) || sscanf(mode + 4, "%ld", &k) != 1 || k < 0) return 0;
    pthread_mutex_lock(&g_mu);
    long n = -1;
    for (int i = 0; i < WALL_MODES; i++) {
        if (!g_wall[i].mode[0]) snprintf(g_wall[i].mode, sizeof g_wall[i].mode, "%s", mode);
        if (!strcmp(g_wall[i].mode, mode)) { n = g_wall[i].served++; break; }
    }
    pthread_mutex_unlock(&g_mu);
    return n >= 0 && n < k ? 10000 : 20000;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void send_body(int fd, int status, const char *ctype, const char *body)
{
    char h[256];
    snprintf(h, sizeof h, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n", status, status == 200 ? "OK" : "Error", ctype, strlen(body));
    if (send_all(fd, h, strlen(h)) == 0) send_all(fd, body, strlen(body));
}

/* The request: headers and its whole body (*body malloc'd). 0 ok. */
static int read_request(int fd, char *method, char *path, char **body, size_t *blen)
{
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap + 1);
    char *hend = NULL;
    if (!buf) return -1;
    while (!hend) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (len == cap || poll(&pf, 1, 10000) <= 0) { free(buf); return -1; }
        ssize_t r = recv(fd, buf + len, cap - len, 0);
        if (r <= 0) { free(buf); return -1; }
        len += (size_t)r;
        buf[len] = '\0';
        hend = strstr(buf, "\r\n\r\n");
    }
    if (sscanf(buf, "%15s %1023s", method, path) != 2) { free(buf); return -1; }
    size_t clen = 0;
    const char *cl = strcasestr(buf, "\r\nContent-Length:");
    if (cl) clen = strtoul(cl + 17, NULL, 10);
    if (clen > BODY_MAX) { free(buf); return -1; }
    size_t hlen = (size_t)(hend + 4 - buf), have = len - hlen;
    char *b = malloc(clen + 1);
    if (!b) { free(buf); return -1; }
    memcpy(b, hend + 4, have < clen ? have : clen);
    while (have < clen) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 10000) <= 0) { free(buf); free(b); return -1; }
        ssize_t r = recv(fd, b + have, clen - have, 0);
        if (r <= 0) { free(buf); free(b); return -1; }
        have += (size_t)r;
    }
    b[clen] = '\0';
    free(buf);
    *body = b;
    *blen = clen;
    return 0;
}

/* /tokenize: what this mode's tokenizer says of n true tokens (add: the
 * client asked for the special tokens too). */
static long told(const char *mode, long n, int add)
{
    if (!strcmp(mode, "double")) return 2 * n;
    if (!strcmp(mode, "plus1")) return n + 1;
    if (!strcmp(mode, "short3")) return n > 3 ? n - 3 : 0;
    if (!strcmp(mode, "bos")) return n + (add ? 1 : 0);
    return n;
}

static void tokenize(int fd, const char *mode, const char *body)
{
    json_t *j = json_loads(body, 0, NULL);
    const char *text = json_string_value(json_object_get(j, "content"));
    if (!text) text = json_string_value(json_object_get(j, "prompt"));
    if (!text) { json_decref(j); send_body(fd, 400, "application/json", "{\"error\":\"no text\"}"); return; }
    int add = json_is_true(json_object_get(j, "add_special")) ||
              json_is_true(json_object_get(j, "add_special_tokens"));
    long n = told(mode, (long)strlen(text), add);
    json_t *o = json_object(), *a = json_array();
    for (long i = 0; i < n; i++)   /* ids: the bytes, a newline's id 10 where there is one */
        json_array_append_new(a, json_integer(i < (long)strlen(text) ? (unsigned char)text[i] : 1));
    json_object_set_new(o, "tokens", a);
    char *s = json_dumps(o, JSON_COMPACT);
    send_body(fd, 200, "application/json", s ? s : "{}");
    free(s);
    json_decref(o);
    json_decref(j);
}

/* The longest byte prefix of p a prompt served before shares; p is kept. */
static long cache_hit(const char *p)
{
    size_t n = strlen(p);
    long best = 0;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nseen && i < CACHE_SLOTS; i++) {
        const char *q = g_seen[i];
        size_t k = 0;
        while (k < n && q[k] && q[k] == p[k]) k++;
        if ((long)k > best) best = (long)k;
    }
    char *keep = strdup(p);
    if (keep) {
        size_t at = g_nseen++ % CACHE_SLOTS;
        free(g_seen[at]);
        g_seen[at] = keep;
    }
    pthread_mutex_unlock(&g_mu);
    return best;
}

/* The usage object of this mode for n prompt tokens, cached of them hit. */
static void usage_text(const char *mode, long n, long cached, char *u, size_t un)
{
    char pt[64], det[96] = "";
    if (!strcmp(mode, "neg")) snprintf(pt, sizeof pt, "-5");
    else if (!strcmp(mode, "huge")) snprintf(pt, sizeof pt, "1e12");
    else if (!strcmp(mode, "frac")) snprintf(pt, sizeof pt, "%ld.5", n);
    else if (!strcmp(mode, "string")) snprintf(pt, sizeof pt, "\"%ld\"", n);
    else snprintf(pt, sizeof pt, "%ld", n);
    if (!strcmp(mode, "cache"))
        snprintf(det, sizeof det, ",\"prompt_tokens_details\":{\"cached_tokens\":%ld}", cached);
    else if (!strcmp(mode, "cachedneg"))
        snprintf(det, sizeof det, ",\"prompt_tokens_details\":{\"cached_tokens\":-3}");
    else if (!strcmp(mode, "cachedbig"))
        snprintf(det, sizeof det, ",\"prompt_tokens_details\":{\"cached_tokens\":%ld}", n + 100);
    snprintf(u, un, "{\"prompt_tokens\":%s,\"completion_tokens\":%d,\"total_tokens\":%ld%s}", pt,
             OUT_TOKENS, n + OUT_TOKENS, det);
}

static void complete(int fd, const char *mode, const char *body, int chat)
{
    json_t *j = json_loads(body, 0, NULL);
    const char *text = NULL;
    if (chat) {
        json_t *m = json_object_get(j, "messages");
        text = json_string_value(json_object_get(json_array_get(m, json_array_size(m) - 1), "content"));
    } else {
        json_t *p = json_object_get(j, "prompt");
        text = json_is_array(p) ? json_string_value(json_array_get(p, 0)) : json_string_value(p);
    }
    if (!text || (chat && !*text && !strcmp(mode, "noempty"))) {
        json_decref(j);
        send_body(fd, 400, "application/json", "{\"error\":{\"message\":\"empty message\"}}");
        return;
    }
    long n = (long)strlen(text) + (chat ? TEMPLATE_TOKENS : 0) + (!strcmp(mode, "bos") ? 1 : 0);
    int caching = !strncmp(mode, "cache", 5);
    long gap = chat && !*text ? 0 : wall_gap_us(mode);
    long cached = caching ? cache_hit(text) : 0;
    if (cached > n) cached = n;
    if (caching) sleep_us(40L * (n - cached));   /* prefill: what was not cached */
    char u[256];
    usage_text(mode, n, cached, u, sizeof u);
    const char *h = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                    "Connection: close\r\n\r\n";
    if (send_all(fd, h, strlen(h))) { json_decref(j); return; }
    char ev[768];
    for (int i = 0; i < OUT_TOKENS; i++) {
        if (gap) sleep_us(gap);
        if (chat)
            snprintf(ev, sizeof ev, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d \"},"
                     "\"finish_reason\":null}]}\n\n", i);
        else
            snprintf(ev, sizeof ev, "data: {\"choices\":[{\"index\":0,\"text\":\"t%d \","
                     "\"finish_reason\":null}]}\n\n", i);
        if (send_all(fd, ev, strlen(ev))) { json_decref(j); return; }
    }
    if (!strcmp(mode, "cachellama") || !strcmp(mode, "cachequiet"))
        snprintf(ev, sizeof ev, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
                 "\"length\"}],\"timings\":{\"prompt_n\":%ld,\"prompt_ms\":1.0,\"predicted_n\":%d,"
                 "\"predicted_ms\":2.0%s%ld}}\n\n", n - cached, OUT_TOKENS,
                 !strcmp(mode, "cachellama") ? ",\"cache_n\":" : ",\"unrelated\":", cached);
    else
        snprintf(ev, sizeof ev, "data: {\"choices\":[{\"index\":0,%s,\"finish_reason\":\"length\"}]}"
                 "\n\n", chat ? "\"delta\":{}" : "\"text\":\"\"");
    send_all(fd, ev, strlen(ev));
    if (strcmp(mode, "nousage")) {
        snprintf(ev, sizeof ev, "data: {\"choices\":[],\"usage\":%s}\n\n", u);
        send_all(fd, ev, strlen(ev));
    }
    send_all(fd, "data: [DONE]\n\n", 14);
    json_decref(j);
}

static void *conn_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char method[16], path[1024], mode[64];
    char *body = NULL;
    size_t blen = 0;
    if (read_request(fd, method, path, &body, &blen) == 0) {
        const char *rest = strchr(path + 1, '/');
        size_t ml = rest ? (size_t)(rest - path - 1) : 0;
        if (!rest || ml >= sizeof mode) {
            send_body(fd, 404, "application/json", "{\"error\":\"no mode\"}");
        } else {
            memcpy(mode, path + 1, ml);
            mode[ml] = '\0';
            if (!strcmp(rest, "/health")) send_body(fd, 200, "application/json", "{\"status\":\"ok\"}");
            else if (!strcmp(rest, "/v1/models"))
                send_body(fd, 200, "application/json",
                          "{\"object\":\"list\",\"data\":[{\"id\":\"tokfront\",\"object\":\"model\"}]}");
            else if (!strcmp(rest, "/tokenize") && !strcmp(mode, "tokfail"))
                send_body(fd, 500, "application/json", "{\"error\":\"tokenizer broke\"}");
            else if (!strcmp(rest, "/tokenize")) tokenize(fd, mode, body);
            else if (!strcmp(rest, "/v1/completions")) complete(fd, mode, body, 0);
            else if (!strcmp(rest, "/v1/chat/completions")) complete(fd, mode, body, 1);
            else send_body(fd, 404, "application/json", "{\"error\":\"not found\"}");
        }
        free(body);
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--help")) {
        printf("usage: tokfront\nmodes (the first path segment):\n%s", MODES);
        return 0;
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    signal(SIGPIPE, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1024) ||
        getsockname(ls, (struct sockaddr *)&a, &al)) {
        perror("tokfront: listen");
        return 1;
    }
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            perror("tokfront: accept");
            return 1;
        }
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, 1 << 20);
        if (pthread_create(&t, &at, conn_main, (void *)(intptr_t)fd) != 0) close(fd);
        pthread_attr_destroy(&at);
    }
}
