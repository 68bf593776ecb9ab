/* A misbehaving OpenAI-compatible server for the probe's tests, on a real
 * loopback socket. The first path segment picks the fault: /normal/v1/...,
 * /drip/v1/..., /reset/v1/... (see MODES below). Prints "port N" once
 * listening; ends with its parent (or SIGTERM). One thread per connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define N_TOKENS 8

static const char *MODES =
    "normal     chat-aware SSE over chunked encoding, keep-alive; each event carries\n"
    "           \"send_ns\", CLOCK_MONOTONIC when it was sent\n"
    "drip       the same stream one byte per write (Connection: close)\n"
    "truncate   closes mid-event (Connection: close)\n"
    "truncchunk closes mid-stream without the last chunk (chunked)\n"
    "reset      RST (SO_LINGER 0) after two events\n"
    "resetearly RST before any reply byte\n"
    "garbage    200 event-stream whose events are binary junk\n"
    "garbagehttp junk bytes instead of an HTTP reply\n"
    "429 / 500  JSON error bodies\n"
    "500html    an HTML error body with markup in it (<img onerror>, Markdown)\n"
    "hang       accepts, reads the request, never answers\n"
    "nodone     complete events without finish_reason, usage or [DONE]\n"
    "finishnodone finish_reason and usage but no [DONE]\n"
    "slowfirst  300 ms before the first byte, then normal\n"
    "errorevent an in-stream {\"error\":...} event\n"
    "json       a non-streaming JSON body\n"
    "oneshot    the whole stream, head and events, in one write (Content-Length)\n"
    "echo       the raw request (headers and body) back as a JSON answer's text\n"
    "(.../health and .../v1/models answer normally in every mode; .../tokenize is 404\n"
    " but in the tokhang and tokdrip modes below)\n"
    "llama      llama.cpp shape with timings\n"
    "llamahuge  the same, its predicted_ms 1e308 (an absurd server timing)\n"
    "keepdrop   as normal, keep-alive, but the next request on the connection is\n"
    "           dropped unanswered (a server closing kept-alive connections)\n"
    "keepalive  CRLF line ends, comments, multi-line data\n"
    "pingforever one content chunk, then an SSE comment (\": ping\") every 0.5 s, never\n"
    "           ending: only a whole-request deadline stops it\n"
    "forever    content chunks as fast as the socket takes them, never ending\n"
    "tokhang    .../tokenize reads the request and never answers (prints \"tokenize\n"
    "           waits\" on stdout first); the rest answers as normal\n"
    "tokdrip    .../tokenize answers 200 with a count, one byte a second (prints\n"
    "           \"tokenize drips\"); the rest answers as normal\n";

static void sleep_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        p += w; n -= (size_t)w;
    }
    return 0;
}
static int send_str(int fd, const char *s) { return send_all(fd, s, strlen(s)); }

static int send_chunked(int fd, const char *p, size_t n)
{
    char hdr[32];
    int h = snprintf(hdr, sizeof hdr, "%zx\r\n", n);
    if (send_all(fd, hdr, (size_t)h)) return -1;
    if (send_all(fd, p, n)) return -1;
    return send_all(fd, "\r\n", 2);
}

/* The events of one answer: role chunk (chat), N content chunks, a finish
 * chunk, a usage chunk. Returned as a NULL-terminated array of "data: ..\n\n". */
typedef struct { char ev[N_TOKENS + 4][512]; int n; } events;

static void make_events(events *e, int chat, int finish, int usage, int llama)
{
    e->n = 0;
    if (chat)
        snprintf(e->ev[e->n++], 512, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\","
                 "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                 "\"finish_reason\":null}]}\n\n");
    for (int i = 0; i < N_TOKENS; i++) {
        if (chat)
            snprintf(e->ev[e->n++], 512, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\","
                     "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok%d \"},"
                     "\"finish_reason\":null}]}\n\n", i);
        else
            snprintf(e->ev[e->n++], 512, "data: {\"id\":\"x\",\"object\":\"text_completion\","
                     "\"choices\":[{\"index\":0,\"text\":\"tok%d \",\"finish_reason\":null}]}\n\n", i);
    }
    if (finish) {
        if (llama)
            snprintf(e->ev[e->n++], 512, "data: {\"choices\":[{\"index\":0,\"delta\":{},"
                     "\"finish_reason\":\"length\"}],\"timings\":{\"prompt_n\":5,\"prompt_ms\":12.5,"
                     "\"predicted_n\":%d,\"predicted_ms\":%s}}\n\n", N_TOKENS,
                     llama == 2 ? "1e308" : "40.0");
        else
            snprintf(e->ev[e->n++], 512, "data: {\"choices\":[{\"index\":0,%s,"
                     "\"finish_reason\":\"length\"}]}\n\n", chat ? "\"delta\":{}" : "\"text\":\"\"");
    }
    if (usage)
        snprintf(e->ev[e->n++], 512, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,"
                 "\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n", N_TOKENS, N_TOKENS + 5);
}

static const char *SSE_CLOSE =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    "Connection: close\r\n\r\n";
static const char *SSE_CHUNKED =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    "Transfer-Encoding: chunked\r\n\r\n";

static void rst_close(int fd)
{
    struct linger lg = { 1, 0 };
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

/* Read one request into buf (NUL-terminated, headers and body, 64 KiB at
 * most kept); fills path. 0 ok, -1 closed or broken. */
static int read_request(int fd, char *path, size_t pathsz, char *buf, size_t *reqlen)
{
    size_t len = 0;
    char *hend = NULL;
    while (!hend) {
        struct pollfd pf = { fd, POLLIN, 0 };
        if (poll(&pf, 1, 10000) <= 0) return -1;
        ssize_t r = recv(fd, buf + len, 65535 - len, 0);
        if (r <= 0) return -1;
        len += (size_t)r;
        buf[len] = '\0';
        hend = strstr(buf, "\r\n\r\n");
        if (!hend && len >= 65535) return -1;
    }
    size_t clen = 0;
    const char *cl = strcasestr(buf, "\r\nContent-Length:");
    if (cl) clen = strtoul(cl + 17, NULL, 10);
    size_t have = len - (size_t)(hend + 4 - buf);
    while (have < clen) {                   /* drain the body */
        char tmp[65536];
        struct pollfd pf = { fd, POLLIN, 0 };
        if (poll(&pf, 1, 10000) <= 0) return -1;
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r <= 0) return -1;
        size_t keep = (size_t)r < 65535 - len ? (size_t)r : 65535 - len;
        memcpy(buf + len, tmp, keep);
        len += keep;
        buf[len] = '\0';
        have += (size_t)r;
    }
    *reqlen = len;
    if (sscanf(buf, "%*s %1023s", path) != 1) return -1;
    (void)pathsz;
    return 0;
}

static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Send e's events gap_us apart; with stamp, each gets a top-level "send_ns"
 * taken just before its bytes go out (the clock is one across processes, so
 * a test can check no byte was stamped before it was sent). */
static int stream_events(int fd, const events *e, int chunked, long gap_us, int stamp)
{
    for (int i = 0; i < e->n; i++) {
        char ev[600];
        size_t n = strlen(e->ev[i]);
        const char *p = e->ev[i];
        if (stamp && n > 3) {                   /* "...}\n\n" -> "...,"send_ns":N}\n\n" */
            int w = snprintf(ev, sizeof ev, "%.*s,\"send_ns\":%lld}\n\n", (int)(n - 3), p, mono_ns());
            if (w > 0 && (size_t)w < sizeof ev) { p = ev; n = (size_t)w; }
        }
        if (chunked ? send_chunked(fd, p, n) : send_all(fd, p, n)) return -1;
        if (gap_us) sleep_us(gap_us);
    }
    const char *done = "data: [DONE]\n\n";
    return chunked ? send_chunked(fd, done, strlen(done)) : send_all(fd, done, strlen(done));
}

static void send_json(int fd, int status, const char *reason, const char *body)
{
    char h[256];
    snprintf(h, sizeof h, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n", status, reason, strlen(body));
    if (send_str(fd, h) == 0) send_str(fd, body);
}

/* The /tokenize faults (tokhang, tokdrip): 1 when path's mode is one and
 * it was served (the connection then closes), 0 otherwise. Each says on
 * stdout that it has the request, so a test can act while it waits. */
static int tokenize_fault(int fd, const char *path)
{
    char mode[64] = "";
    sscanf(path, "/%63[^/]", mode);
    if (!strcmp(mode, "tokhang")) {
        printf("tokenize waits\n");
        fflush(stdout);
        char tmp[256];
        struct pollfd pf = { fd, POLLIN, 0 };
        while (poll(&pf, 1, 600000) > 0 && recv(fd, tmp, sizeof tmp, 0) > 0) {}
        return 1;
    }
    if (!strcmp(mode, "tokdrip")) {
        static const char body[] = "{\"count\":5,\"tokens\":[1,2,3,4,5]}";
        char h[160];
        snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\n\r\n", sizeof body - 1);
        printf("tokenize drips\n");
        fflush(stdout);
        if (send_str(fd, h)) return 1;
        for (size_t i = 0; i < sizeof body - 1; i++) {
            if (send_all(fd, body + i, 1)) return 1;
            sleep_us(1000000);
        }
        return 1;
    }
    return 0;
}

/* Serve one request; returns 1 to keep the connection for another. */
static int serve(int fd, const char *path, const char *req)
{
    /* the server is alive: only its completions misbehave */
    size_t pl = strlen(path);
    if (pl >= 7 && !strcmp(path + pl - 7, "/health")) { send_json(fd, 200, "OK", "{}"); return 1; }
    if (pl >= 10 && !strcmp(path + pl - 10, "/v1/models")) {
        send_json(fd, 200, "OK", "{\"object\":\"list\",\"data\":[{\"id\":\"m\",\"object\":\"model\"}]}");
        return 1;
    }
    if (pl >= 9 && !strcmp(path + pl - 9, "/tokenize") && tokenize_fault(fd, path)) return 0;
    if ((pl >= 9 && !strcmp(path + pl - 9, "/tokenize")) || (pl >= 11 && !strcmp(path + pl - 11, "/detokenize"))) {
        send_json(fd, 404, "Not Found", "{\"error\":{\"message\":\"no such endpoint\"}}");
        return 1;
    }
    char mode[64] = "normal";
    sscanf(path, "/%63[^/]", mode);
    int chat = strstr(path, "/chat/") != NULL;
    events e;
    make_events(&e, chat, 1, 1, 0);
    if (!strcmp(mode, "slowfirst")) { sleep_us(300000); strcpy(mode, "normal"); }
    if (!strcmp(mode, "tokhang") || !strcmp(mode, "tokdrip")) strcpy(mode, "normal");

    if (!strcmp(mode, "normal") || !strcmp(mode, "v1")) {
        if (send_str(fd, SSE_CHUNKED) || stream_events(fd, &e, 1, 2000, 1)) return 0;
        return send_str(fd, "0\r\n\r\n") == 0;
    }
    if (!strcmp(mode, "keepdrop")) {   /* as normal; then conn_main drops the next request */
        if (send_str(fd, SSE_CHUNKED) || stream_events(fd, &e, 1, 2000, 1)) return 0;
        return send_str(fd, "0\r\n\r\n") == 0 ? 2 : 0;
    }
    if (!strcmp(mode, "drip")) {
        if (send_str(fd, SSE_CLOSE)) return 0;
        for (int i = 0; i <= e.n; i++) {
            const char *p = i < e.n ? e.ev[i] : "data: [DONE]\n\n";
            for (; *p; p++) { if (send_all(fd, p, 1)) return 0; sleep_us(50); }
        }
        return 0;
    }
    if (!strcmp(mode, "truncate")) {
        if (send_str(fd, SSE_CLOSE)) return 0;
        for (int i = 0; i < 3; i++) send_str(fd, e.ev[i]);
        send_all(fd, e.ev[3], strlen(e.ev[3]) / 2);
        return 0;
    }
    if (!strcmp(mode, "truncchunk")) {
        if (send_str(fd, SSE_CHUNKED)) return 0;
        for (int i = 0; i < 3; i++) send_chunked(fd, e.ev[i], strlen(e.ev[i]));
        return 0;
    }
    if (!strcmp(mode, "reset")) {
        if (send_str(fd, SSE_CLOSE)) return 0;
        send_str(fd, e.ev[0]);
        send_str(fd, e.ev[1]);
        sleep_us(20000);
        rst_close(fd);
        return -1;
    }
    if (!strcmp(mode, "resetearly")) { rst_close(fd); return -1; }
    if (!strcmp(mode, "garbage")) {
        static const char junk[] = "data: \x89PNG\r\n\x1a\n\x00\xff\xfe garbage }{\n\n"
                                   "\xde\xad\xbe\xef\n\n";
        if (send_str(fd, SSE_CLOSE) == 0) send_all(fd, junk, sizeof junk - 1);
        return 0;
    }
    if (!strcmp(mode, "garbagehttp")) {
        static const char junk[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http at all\r\n\r\n";
        send_all(fd, junk, sizeof junk - 1);
        return 0;
    }
    if (!strcmp(mode, "429")) {
        send_json(fd, 429, "Too Many Requests",
                  "{\"error\":{\"message\":\"rate limit reached\",\"type\":\"rate_limit_error\",\"code\":429}}");
        return 1;
    }
    if (!strcmp(mode, "500")) {
        send_json(fd, 500, "Internal Server Error",
                  "{\"object\":\"error\",\"message\":\"engine died\",\"type\":\"InternalServerError\",\"code\":500}");
        return 1;
    }
    if (!strcmp(mode, "500html")) {
        static const char body[] = "<html><img src=x onerror=alert(1)> *boom* [x](javascript:y) | z</html>";
        char head[256];
        int n = snprintf(head, sizeof head, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/html\r\n"
                         "Content-Length: %zu\r\n\r\n", sizeof body - 1);
        send_all(fd, head, (size_t)n);
        send_all(fd, body, sizeof body - 1);
        return 1;
    }
    if (!strcmp(mode, "hang")) {
        char tmp[256];
        struct pollfd pf = { fd, POLLIN, 0 };
        while (poll(&pf, 1, 30000) > 0 && recv(fd, tmp, sizeof tmp, 0) > 0) {}
        return 0;
    }
    if (!strcmp(mode, "nodone") || !strcmp(mode, "finishnodone")) {
        int fin = mode[0] == 'f';
        make_events(&e, chat, fin, fin, 0);
        if (send_str(fd, SSE_CLOSE)) return 0;
        for (int i = 0; i < e.n; i++) send_str(fd, e.ev[i]);
        return 0;
    }
    if (!strcmp(mode, "errorevent")) {
        if (send_str(fd, SSE_CLOSE)) return 0;
        send_str(fd, e.ev[0]);
        send_str(fd, e.ev[1]);
        send_str(fd, "data: {\"error\":{\"message\":\"engine crashed\",\"code\":500}}\n\n");
        send_str(fd, "data: [DONE]\n\n");
        return 0;
    }
    if (!strcmp(mode, "echo")) {              /* the raw request back as the text */
        size_t n = strlen(req), o = 0;
        char *body = malloc(n * 6 + 256);
        if (!body) return 0;
        o += (size_t)sprintf(body, "{\"choices\":[{\"index\":0,\"text\":\"");
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)req[i];
            if (c == '"' || c == '\\') { body[o++] = '\\'; body[o++] = (char)c; }
            else if (c < 0x20) o += (size_t)sprintf(body + o, "\\u%04x", c);
            else body[o++] = (char)c;
        }
        sprintf(body + o, "\",\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}");
        send_json(fd, 200, "OK", body);
        free(body);
        return 1;
    }
    if (!strcmp(mode, "oneshot")) {           /* one write: the reader gets it in one read */
        char all[sizeof e.ev + 512];
        size_t n = 0;
        for (int i = 0; i < e.n; i++) n += (size_t)snprintf(all + n, sizeof all - n, "%s", e.ev[i]);
        n += (size_t)snprintf(all + n, sizeof all - n, "data: [DONE]\n\n");
        char msg[sizeof all + 256];
        int h = snprintf(msg, sizeof msg, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         "Content-Length: %zu\r\n\r\n%s", n, all);
        return send_all(fd, msg, (size_t)h) == 0;
    }
    if (!strcmp(mode, "json")) {
        send_json(fd, 200, "OK", chat
            ? "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hello world\"},"
              "\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}"
            : "{\"choices\":[{\"index\":0,\"text\":\"hello world\",\"finish_reason\":\"length\"}],"
              "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}");
        return 1;
    }
    if (!strcmp(mode, "llama") || !strcmp(mode, "llamahuge")) {
        make_events(&e, chat, 1, 0, strcmp(mode, "llama") ? 2 : 1);
        if (send_str(fd, SSE_CHUNKED) || stream_events(fd, &e, 1, 1000, 0)) return 0;
        return send_str(fd, "0\r\n\r\n") == 0;
    }
    if (!strcmp(mode, "keepalive")) {
        if (send_str(fd, SSE_CLOSE)) return 0;
        send_str(fd, ": ping\r\n\r\n");
        for (int i = 0; i < e.n; i++) {
            /* split the JSON over two data lines; they join with "\n" */
            char *ev = e.ev[i] + 6;                 /* past "data: " */
            size_t n = strlen(ev) - 2;              /* minus "\n\n" */
            char *comma = memchr(ev, ',', n);
            size_t cut = comma ? (size_t)(comma - ev) + 1 : n;
            char out[1200];
            int k = snprintf(out, sizeof out, "data: %.*s\r\ndata: %.*s\r\n: keep-alive\r\n\r\n",
                             (int)cut, ev, (int)(n - cut), ev + cut);
            send_all(fd, out, (size_t)k);
        }
        send_str(fd, "data: [DONE]\r\n\r\n");
        return 0;
    }
    if (!strcmp(mode, "pingforever")) {        /* until the client hangs up */
        if (send_str(fd, SSE_CLOSE) || send_str(fd, e.ev[chat ? 1 : 0])) return 0;
        while (send_str(fd, ": ping\n\n") == 0) sleep_us(500000);
        return 0;
    }
    if (!strcmp(mode, "forever")) {
        if (send_str(fd, SSE_CLOSE)) return 0;
        for (unsigned long k = 0;; k++) {
            char ev[160];
            int n = snprintf(ev, sizeof ev, chat
                ? "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%lu \"},\"finish_reason\":null}]}\n\n"
                : "data: {\"choices\":[{\"index\":0,\"text\":\"t%lu \",\"finish_reason\":null}]}\n\n", k);
            if (send_all(fd, ev, (size_t)n)) return 0;
        }
    }
    send_json(fd, 404, "Not Found", "{\"error\":{\"message\":\"unknown fault mode\"}}");
    return 1;
}

static void *conn_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char path[1024];
    char *req = malloc(65536);
    size_t reqlen = 0;
    int keep = 1;
    while (req && keep == 1 && read_request(fd, path, sizeof path, req, &reqlen) == 0) {
        keep = serve(fd, path, req);
        if (keep == 2) {   /* keepdrop: the request that reuses it finds it closed */
            (void)read_request(fd, path, sizeof path, req, &reqlen);
            keep = 0;
        }
    }
    free(req);
    if (keep != -1) close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    int port = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc) port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--help")) { printf("usage: faultserver [--port N]\nmodes:\n%s", MODES); return 0; }
        else { fprintf(stderr, "faultserver: unknown argument \"%s\"\n", argv[i]); return 2; }
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
    a.sin_port = htons((uint16_t)port);
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1024)
        || getsockname(ls, (struct sockaddr *)&a, &al)) {
        perror("faultserver: listen");
        return 1;
    }
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) { if (errno == EINTR || errno == ECONNABORTED) continue; perror("accept"); return 1; }
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, 1 << 20);   /* sanitizers need room */
        if (pthread_create(&t, &at, conn_main, (void *)(intptr_t)fd) != 0) close(fd);
        pthread_attr_destroy(&at);
    }
}
