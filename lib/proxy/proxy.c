/* caliper proxy — the server side: libmicrohttpd takes the client's request
 * (one thread per connection), a libcurl worker thread forwards it upstream,
 * and the reply goes back chunk by chunk through a bounded queue. Bytes are
 * timestamped on receipt from upstream; SSE events are read on the way
 * through (the probe's SSE parser and chunk interpreter) without delaying
 * them. Token counting (POST /tokenize) runs after the reply has ended. */
#include "caliper/proxy.h"
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include "caliper/buf.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/global.h"
#include "caliper/probe.h"
#include "caliper/series.h"
#include "caliper/workload.h"
#include "lib/util/conn_guard.h"
#include "lib/util/curl_wait.h"

/* What one connection buffers toward its client. 260 clients that asked
 * for a long stream and never read it took the proxy to 676 MB with a
 * 1 MiB mark (the queue grew by doubling to 2 MiB each); the kernel's send
 * buffer is bounded too (the guard). 64 KiB is hundreds of tokens of SSE
 * ahead of a client that reads at all. */
#define QUEUE_HIGH     (64u << 10)   /* above this the upstream read waits */
#define QUEUE_MAX      (1u << 20)    /* hard cap: QUEUE_HIGH plus one delivery from libcurl */
#define SEND_BUFFER_BYTES (64 * 1024) /* SO_SNDBUF of a client connection (doubled by the kernel) */
#define SSE_EVENT_MAX  (4u << 20)
#define NONSTREAM_MAX  (16u << 20)   /* non-streaming body kept for its usage */
#define TOKENIZE_BODY_MAX (64u << 20)

struct cal_proxy {
    cal_proxy_config   cfg;
    char               upstream[1024];   /* without a trailing '/' */
    char               host[64];
    struct MHD_Daemon *d;
    cal_guard         *guard;            /* request deadlines, free slots */
    int                port;
    atomic_int         stopping;         /* aborts transfers at close */
    pthread_mutex_t    turn_mu;          /* one on_turn call at a time */
    long               turns;
    atomic_int         tokenize_mode;    /* 0 untried, 1 {"prompt"}, 2 {"content"}, -1 absent */
};

typedef struct xfer {
    cal_proxy         *px;
    atomic_int         refs;             /* the connection and the response */
    cal_buf            req;              /* the client's body */
    int                too_big;
    int                refused;          /* answered on the first call: nothing is forwarded */
    char               method[16];
    char               path[128];
    char              *target;           /* the raw request target (origin form once checked) */
    size_t             path_len;         /* its path part, once checked */
    CURLU             *url;              /* upstream URL with the query */
    struct curl_slist *hdrs;
    CURL              *h;
    /* turn accounting: written by the worker only */
    int                is_turn;
    cal_prefix         prefix;
    cal_sse           *sse;
    cal_buf            whole;            /* non-streaming reply, for its usage */
    int64_t            t0_ns, rx_ns, first_text_ns, last_text_ns, last_byte_ns, wall_ns;
    long               text_chunks, usage_out, usage_prompt;
    long               reads;            /* deliveries from upstream (on_body calls) */
    long               text_reads, text_read_at;   /* ... that carried text; the last one */
    /* the queue between the worker and the client, under mu */
    pthread_mutex_t    mu;
    pthread_cond_t     cv;
    cal_buf            q;
    int                headers_done, done, abandoned;
    long               status;
    char               ctype[256];
    struct MHD_Connection *conn;         /* the client's, for the send deadline */
    CURLcode           cc;
    char               errbuf[CURL_ERROR_SIZE];
    pthread_t          th;
    int                th_started, th_joined;
} xfer;

static void xfer_unref(xfer *x)
{
    if (atomic_fetch_sub(&x->refs, 1) != 1) return;
    cal_buf_free(&x->req);
    cal_buf_free(&x->q);
    cal_buf_free(&x->whole);
    cal_sse_close(&x->sse);
    cal_prefix_free(&x->prefix);
    curl_slist_free_all(x->hdrs);
    curl_url_cleanup(x->url);
    free(x->target);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    free(x);
}

static void join_worker(xfer *x)
{
    if (!x->th_started || x->th_joined) return;
    pthread_mutex_lock(&x->mu);
    x->abandoned = 1;                 /* a worker waiting for room gives up */
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    pthread_join(x->th, NULL);
    x->th_joined = 1;
}

static size_t buf_write(char *p, size_t sz, size_t nm, void *ud)
{
    return cal_buf_append(ud, p, sz * nm) == CAL_OK ? sz * nm : 0;
}

/* ---- upstream side (worker thread) ------------------------------------- */

static int on_event(void *ud, const char *data, size_t len)
{
    xfer *x = ud;
    cal_chunk c;
    if (cal_chunk_parse(data, len, &c, NULL) != CAL_OK) return 0;   /* passed on, not judged */
    if (c.flags & CAL_CHUNK_TEXT) {
        if (!x->first_text_ns) x->first_text_ns = x->rx_ns;
        x->last_text_ns = x->rx_ns;
        x->text_chunks++;
        if (x->text_read_at != x->reads) { x->text_reads++; x->text_read_at = x->reads; }
    }
    if ((c.flags & CAL_CHUNK_USAGE) && c.completion_tokens >= 0) x->usage_out = c.completion_tokens;
    if (c.prompt_tokens >= 0) x->usage_prompt = c.prompt_tokens;
    return 0;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t n = sz * nm;
    if (n >= 13 && !strncasecmp(p, "content-type:", 13)) {
        size_t k = 13, e = n;
        while (k < n && (p[k] == ' ' || p[k] == '\t')) k++;
        while (e > k && (p[e - 1] == '\r' || p[e - 1] == '\n' || p[e - 1] == ' ')) e--;
        pthread_mutex_lock(&x->mu);
        snprintf(x->ctype, sizeof x->ctype, "%.*s", (int)(e - k), p + k);
        pthread_mutex_unlock(&x->mu);
    } else if (n <= 2 && (n == 0 || p[0] == '\r' || p[0] == '\n')) {
        long st = 0;                          /* end of a header block */
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &st);
        if (st >= 200) {                      /* not a 1xx: the client may have it now */
            pthread_mutex_lock(&x->mu);
            x->status = st;
            x->headers_done = 1;
            pthread_cond_broadcast(&x->cv);
            pthread_mutex_unlock(&x->mu);
        }
    }
    return n;
}

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t n = sz * nm;
    int64_t t = cal_now_ns();                 /* receipt, before anything else */
    x->rx_ns = x->last_byte_ns = t;
    x->reads++;
    pthread_mutex_lock(&x->mu);
    while (x->q.len > QUEUE_HIGH && !x->abandoned) pthread_cond_wait(&x->cv, &x->mu);
    int ok = !x->abandoned && cal_buf_append(&x->q, p, n) == CAL_OK;
    x->headers_done = 1;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    if (!ok) return 0;                        /* the client went away: stop upstream */
    if (x->is_turn) {
        if (x->sse) cal_sse_feed(x->sse, p, n);   /* a cap passed: counting stops, not the reply */
        else cal_buf_append(&x->whole, p, n);
    }
    return n;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    xfer *x = ud;
    return atomic_load(&x->px->stopping) ? 1 : 0;
}

/* POST upstream/tokenize for one text: its token count, -1 when there is
 * none, -2 when the call timed out, could not connect or was stopped (the
 * turn asks no more). vLLM and caliper serve take {"prompt"}, llama.cpp
 * {"content"}; the first that answers is kept, and a server without the
 * endpoint is not asked again. Each call has a 30 s deadline on the whole
 * call (a trickling answer included) and ends within 100 ms of close. */
static long tokenize_one(cal_proxy *px, CURL *h, const char *text)
{
    int mode = atomic_load(&px->tokenize_mode);
    if (mode < 0) return -1;
    char url[1100];
    snprintf(url, sizeof url, "%s/tokenize", px->upstream);
    for (int m = mode ? mode : 1; m <= (mode ? mode : 2); m++) {
        json_t *o = json_pack("{s:s}", m == 1 ? "prompt" : "content", text);
        char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!body) return -1;
        cal_buf r = CAL_BUF_INIT(TOKENIZE_BODY_MAX);
        struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
        curl_easy_reset(h);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, buf_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
        CURLcode cc = cal_curl_perform(NULL, h, NULL, &px->stopping);
        long st = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
        curl_slist_free_all(hd);
        free(body);
        long count = -1;
        int got;   /* the one reader of a /tokenize answer (workload.h) */
        if (cc == CURLE_OK && st == 200 && cal_tokenize_answer(r.data, r.len, &got, NULL, NULL) == CAL_OK)
            count = got;
        cal_buf_free(&r);
        if (count >= 0) { atomic_store(&px->tokenize_mode, m); return count; }
        if (cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_ABORTED_BY_CALLBACK ||
            cc == CURLE_COULDNT_CONNECT)
            return -2;   /* mode unchanged: a later turn asks again */
        if (cc != CURLE_OK || st == 404 || st == 405 || st >= 500) break;
    }
    if (!mode) atomic_store(&px->tokenize_mode, -1);   /* absent: estimate from now on */
    return -1;
}

static void finish_turn(xfer *x)
{
    cal_proxy *px = x->px;
    cal_proxy_turn t;
    memset(&t, 0, sizeof t);
    snprintf(t.path, sizeof t.path, "%s", x->path);
    t.status = (int)x->status;
    t.wall_ns = x->wall_ns;
    if (x->cc != CURLE_OK)
        snprintf(t.error, sizeof t.error, "upstream: %.140s", x->errbuf[0] ? x->errbuf : curl_easy_strerror(x->cc));
    else if (x->status >= 400)
        snprintf(t.error, sizeof t.error, "upstream answered HTTP %ld", x->status);
    if (!x->sse && x->whole.len) {            /* non-streaming: one JSON body */
        cal_chunk c;
        if (cal_chunk_parse(x->whole.data, x->whole.len, &c, NULL) == CAL_OK) {
            if ((c.flags & CAL_CHUNK_USAGE) && c.completion_tokens >= 0) x->usage_out = c.completion_tokens;
            if (c.prompt_tokens >= 0) x->usage_prompt = c.prompt_tokens;
        }
    }
    if (px->cfg.tokenize && !atomic_load(&px->stopping)) {
        CURL *h = curl_easy_init();
        for (int k = 0; h && k < CAL_PART_N; k++) {
            if (!x->prefix.part[k].chars) continue;
            long n = tokenize_one(px, h, x->prefix.text[k]);
            if (n == -2) break;   /* the rest stay estimated */
            if (n >= 0) { x->prefix.part[k].tokens = n; x->prefix.part[k].estimated = 0; }
        }
        if (h) curl_easy_cleanup(h);
    }
    t.prefix = x->prefix;
    for (int k = 0; k < CAL_PART_N; k++) {
        t.prefix.text[k] = NULL;
        t.prefix_tokens += t.prefix.part[k].tokens;
        t.prefix_estimated |= t.prefix.part[k].estimated;
    }
    const double s = 1e-9;
    t.turn_s = (double)(x->last_byte_ns - x->t0_ns) * s;
    t.ttft_s = x->first_text_ns ? (double)(x->first_text_ns - x->t0_ns) * s : NAN;
    /* events that came in one read share its timestamp: their spread is
     * not a decode time. A fast engine's whole answer can arrive in one
     * read; that is unknown (null), not 0 s and an infinite speed. */
    t.decode_s = x->text_reads >= 2 && x->last_text_ns > x->first_text_ns
                 ? (double)(x->last_text_ns - x->first_text_ns) * s : NAN;
    t.text_chunks = x->text_chunks;
    t.text_reads = x->text_reads;
    t.usage_prompt_tokens = x->usage_prompt;
    if (x->usage_out >= 0) { t.output_tokens = x->usage_out; t.output_from_usage = 1; }
    else t.output_tokens = x->sse ? x->text_chunks : -1;
    /* SPEC 1.3: the client's speed is decode tokens ÷ decode seconds
     * (377 ÷ 10.003 s = 37.7); the decode tokens are those after the first,
     * whose time decode_s spans: the run's decode speed, through its one
     * formula (series.h, CAL_S_DECODE_TOKS) */
    t.decode_tok_s = isfinite(t.decode_s)
                     ? cal_decode_tok_s(x->first_text_ns, x->last_text_ns, t.output_tokens) : NAN;
    t.ttft_share = (isfinite(t.ttft_s) && t.turn_s > 0) ? t.ttft_s / t.turn_s : NAN;
    pthread_mutex_lock(&px->turn_mu);
    t.index = ++px->turns;
    if (px->cfg.on_turn) px->cfg.on_turn(px->cfg.ud, &t);
    pthread_mutex_unlock(&px->turn_mu);
}

static void *worker(void *arg)
{
    xfer *x = arg;
    CURL *h = x->h;
    curl_easy_setopt(h, CURLOPT_CURLU, x->url);   /* built part by part: never the client's authority */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, x->hdrs);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    if (!strcmp(x->method, "GET")) curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    else if (!strcmp(x->method, "HEAD")) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    else {
        if (strcmp(x->method, "POST")) curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, x->method);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, x->req.data ? x->req.data : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->req.len);
    }
    x->t0_ns = cal_now_ns();
    CURLcode cc = curl_easy_perform(h);
    long st = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    if (!x->last_byte_ns) x->last_byte_ns = cal_now_ns();
    curl_easy_cleanup(h);
    x->h = NULL;
    pthread_mutex_lock(&x->mu);
    x->cc = cc;
    x->status = st;
    x->headers_done = 1;
    x->done = 1;                              /* the client's stream may end now */
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    if (x->is_turn) finish_turn(x);           /* after the client has its last byte */
    return NULL;
}

/* ---- client side (libmicrohttpd connection threads) --------------------- */

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    xfer *x = cls;
    pthread_mutex_lock(&x->mu);
    if (!x->q.len && !x->done) {
        /* waiting for the upstream is no client's fault */
        cal_guard_reply_waiting(x->px->guard, x->conn);
        while (!x->q.len && !x->done) pthread_cond_wait(&x->cv, &x->mu);
    }
    if (!x->q.len) {
        int bad = x->cc != CURLE_OK;
        pthread_mutex_unlock(&x->mu);
        return bad ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = x->q.len < max ? x->q.len : max;
    memcpy(buf, x->q.data, n);
    cal_buf_consume(&x->q, n);
    /* the daemon asks for more once the client took what it had: the send
     * deadline starts again */
    cal_guard_reply_sending(x->px->guard, x->conn);
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    return (ssize_t)n;
}

static void reader_free(void *cls)
{
    xfer *x = cls;
    join_worker(x);
    xfer_unref(x);
}

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
    static const char *const SKIP[] = {"host", "content-length", "connection", "transfer-encoding",
                                       "expect", "accept-encoding", "keep-alive", "te", "upgrade",
                                       "proxy-connection"};
    xfer *x = cls;
    for (size_t i = 0; i < sizeof SKIP / sizeof SKIP[0]; i++)
        if (!strcasecmp(k, SKIP[i])) return MHD_YES;
    char line[8192];
    if ((size_t)snprintf(line, sizeof line, "%s: %s", k, v ? v : "") >= sizeof line) return MHD_YES;
    struct curl_slist *l = curl_slist_append(x->hdrs, line);
    if (l) x->hdrs = l;
    return MHD_YES;
}

static enum MHD_Result reply_json(cal_proxy *px, struct MHD_Connection *c, unsigned status,
                                  const char *msg)
{
    json_t *o = json_pack("{s:{s:s,s:s,s:i}}", "error", "message", msg, "type", "proxy_error",
                          "code", (int)status);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    struct MHD_Response *r = MHD_create_response_from_buffer(s ? strlen(s) : 0, s ? s : (char *)"",
                                                             s ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) { free(s); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", "application/json");
    cal_guard_reply_sending(px->guard, c);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static int ends_with(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && !memcmp(s + n - k, suf, k);
}

static xfer *xfer_new(cal_proxy *px)
{
    xfer *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    atomic_init(&x->refs, 1);
    x->px = px;
    x->req = (cal_buf)CAL_BUF_INIT(px->cfg.max_body);
    x->q = (cal_buf)CAL_BUF_INIT(QUEUE_MAX);
    x->whole = (cal_buf)CAL_BUF_INIT(NONSTREAM_MAX);
    x->usage_out = x->usage_prompt = -1;
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    return x;
}

/* libmicrohttpd hands the access handler a %-decoded path without its
 * query; the proxy needs the target exactly as the client wrote it, to
 * check it and pass it on unchanged. This callback sees it first, and what
 * it returns becomes the request's context. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)c;
    xfer *x = xfer_new(cls);
    if (x && uri) x->target = strndup(uri, CAL_PROXY_TARGET_MAX + 1);
    return x;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    cal_proxy *px = cls;
    xfer *x = *con_cls;
    if (!x) return MHD_NO;                    /* on_uri could not allocate */
    if (!x->method[0]) {                      /* the first call: headers are in */
        cal_guard_headers_in(px->guard, c);
        snprintf(x->method, sizeof x->method, "%s", method);
        char why[160];
        if (!x->target) {
            x->refused = 1;
            cal_guard_request_in(px->guard, c);   /* answered: the reply is not cut */
            return reply_json(px, c, 500, "caliper proxy: out of memory");
        }
        if (cal_proxy_target_check(x->target, &x->path_len, why, sizeof why) != CAL_OK) {
            char msg[200];
            snprintf(msg, sizeof msg, "caliper proxy: %s", why);
            x->refused = 1;
            cal_guard_request_in(px->guard, c);
            return reply_json(px, c, 400, msg);
        }
        snprintf(x->path, sizeof x->path, "%.*s", (int)x->path_len, x->target);
        return MHD_YES;
    }
    if (*upload_size) {
        if (!x->too_big && !x->refused && cal_buf_append(&x->req, upload, *upload_size) != CAL_OK)
            x->too_big = 1;
        *upload_size = 0;
        return MHD_YES;
    }
    /* the whole request is in: the wait for the upstream and the reply
     * have no deadline here */
    cal_guard_request_in(px->guard, c);
    if (x->th_started || x->refused) return MHD_NO;   /* already answered */
    if (x->too_big) return reply_json(px, c, 413, "caliper proxy: the request body is over its cap");
    x->wall_ns = cal_wall_ns();
    x->h = curl_easy_init();
    char why[160];
    int rc = x->h ? cal_proxy_upstream_url(px->upstream, x->target, &x->url, NULL, why, sizeof why)
                  : CAL_ENOMEM;
    if (rc != CAL_OK) {
        if (x->h) curl_easy_cleanup(x->h);
        x->h = NULL;
        if (rc == CAL_ENOMEM) return reply_json(px, c, 500, "caliper proxy: out of memory");
        char msg[200];
        snprintf(msg, sizeof msg, "caliper proxy: %s", why);
        return reply_json(px, c, 400, msg);
    }
    MHD_get_connection_values(c, MHD_HEADER_KIND, add_header, x);
    struct curl_slist *l = curl_slist_append(x->hdrs, "Expect:");
    if (l) x->hdrs = l;
    if (!strcmp(method, "POST") && (ends_with(x->target, x->path_len, "/chat/completions") ||
                                    ends_with(x->target, x->path_len, "/completions"))) {
        if (cal_prefix_parse(x->req.data, x->req.len, &x->prefix, why, sizeof why) == CAL_OK) {
            x->is_turn = 1;
            if (x->prefix.stream && cal_sse_open(SSE_EVENT_MAX, on_event, x, &x->sse) != CAL_OK)
                x->sse = NULL;
        }
    }
    if (pthread_create(&x->th, NULL, worker, x) != 0) {
        curl_easy_cleanup(x->h);
        x->h = NULL;
        return reply_json(px, c, 500, "caliper proxy: cannot start a thread");
    }
    x->th_started = 1;
    pthread_mutex_lock(&x->mu);
    while (!x->headers_done) pthread_cond_wait(&x->cv, &x->mu);
    int failed = x->done && x->cc != CURLE_OK && !x->q.len && x->status == 0;
    long status = x->status;
    char ctype[256];
    snprintf(ctype, sizeof ctype, "%s", x->ctype);
    pthread_mutex_unlock(&x->mu);
    if (failed) {
        join_worker(x);
        char msg[CURL_ERROR_SIZE + 1100];
        snprintf(msg, sizeof msg, "caliper proxy: upstream %s: %s", px->upstream,
                 x->errbuf[0] ? x->errbuf : curl_easy_strerror(x->cc));
        return reply_json(px, c, 502, msg);
    }
    atomic_fetch_add(&x->refs, 1);
    x->conn = c;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, reader, x,
                                                               reader_free);
    if (!r) { reader_free(x); return MHD_NO; }
    if (ctype[0]) MHD_add_response_header(r, "Content-Type", ctype);
    if (!strncasecmp(ctype, "text/event-stream", 17)) MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)(status ? status : 502), r);
    MHD_destroy_response(r);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    cal_proxy *px = cls;
    cal_guard_reply_done(px->guard, c);
    xfer *x = *con_cls;
    if (!x) return;
    *con_cls = NULL;
    xfer_unref(x);
}

/* ---- open / close ------------------------------------------------------ */

int cal_proxy_open(const cal_proxy_config *cfg, cal_proxy **out, char *why, size_t why_len)
{
    *out = NULL;
    const char *host = cfg->host ? cfg->host : "127.0.0.1";
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)cfg->port);
    if (cfg->port < 0 || cfg->port > 65535 || inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        snprintf(why, why_len, "listen address \"%s:%d\" is not IPv4:PORT", host, cfg->port);
        return CAL_EINVAL;
    }
    const char *up = cfg->upstream;
    if (!up || (strncmp(up, "http://", 7) && strncmp(up, "https://", 8)) || strlen(up) >= 1000) {
        snprintf(why, why_len, "upstream \"%s\" is not an http:// or https:// URL", up ? up : "");
        return CAL_EINVAL;
    }
    int urc = cal_proxy_upstream_url(up, "/", NULL, NULL, why, why_len);   /* curl must parse it */
    if (urc != CAL_OK) return urc;
    cal_proxy *px = calloc(1, sizeof *px);
    if (!px) return CAL_ENOMEM;
    px->cfg = *cfg;
    if (!px->cfg.max_body) px->cfg.max_body = 32u << 20;
    if (!px->cfg.max_connections) px->cfg.max_connections = CAL_PROXY_MAX_CONN;
    if (!px->cfg.idle_timeout_s) px->cfg.idle_timeout_s = CAL_PROXY_IDLE_S;
    if (px->cfg.header_timeout_ns <= 0) px->cfg.header_timeout_ns = CAL_PROXY_HEADER_NS;
    if (px->cfg.body_timeout_ns <= 0) px->cfg.body_timeout_ns = CAL_PROXY_BODY_NS;
    if (px->cfg.send_timeout_ns <= 0) px->cfg.send_timeout_ns = CAL_PROXY_SEND_NS;
    size_t ul = strlen(up);
    while (ul > 0 && up[ul - 1] == '/') ul--;
    snprintf(px->upstream, sizeof px->upstream, "%.*s", (int)ul, up);
    px->cfg.upstream = px->upstream;
    snprintf(px->host, sizeof px->host, "%s", host);
    px->cfg.host = px->host;
    pthread_mutex_init(&px->turn_mu, NULL);
    cal_global_init();
    /* A connection limit and an idle timeout: without them about a thousand
     * silent sockets (select's FD_SETSIZE) shut every real client out for
     * good. poll, not select, so descriptors above 1023 still work. The
     * timeout counts silence on the socket only: a thread blocked here on
     * the upstream (a long non-streaming turn) is not timed out
     * (tests/e2e/test_proxy.sh checks one 3x the timeout). Silence is not
     * the only way to hold a slot: every byte resets that timeout, and 256
     * sockets sending a header line every few seconds held every slot for
     * good. The guard gives the request head and body fixed deadlines and
     * keeps a few slots free by closing the longest wait for a request. */
    cal_guard_config gc = {.head_ns = px->cfg.header_timeout_ns, .body_ns = px->cfg.body_timeout_ns,
                           .keepalive_ns = (int64_t)px->cfg.idle_timeout_s * 1000000000,
                           .send_ns = px->cfg.send_timeout_ns,
                           .send_buffer_bytes = SEND_BUFFER_BYTES,
                           .max_conn = px->cfg.max_connections};
    int grc = cal_guard_open(&gc, &px->guard);
    if (grc == CAL_OK)
        px->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                 MHD_USE_POLL,
                                 (uint16_t)cfg->port, NULL, NULL, on_request, px,
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                                 MHD_OPTION_URI_LOG_CALLBACK, on_uri, px,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, px,
                                 MHD_OPTION_NOTIFY_CONNECTION, cal_guard_notify, px->guard,
                                 MHD_OPTION_CONNECTION_LIMIT, cal_guard_daemon_limit(px->guard),
                                 MHD_OPTION_CONNECTION_TIMEOUT, px->cfg.idle_timeout_s,
                                 MHD_OPTION_END);
    if (!px->d) {
        if (grc == CAL_OK) snprintf(why, why_len, "cannot listen on %s:%d", host, cfg->port);
        else snprintf(why, why_len, "connection guard: %s", cal_strerror(grc));
        cal_guard_close(&px->guard);
        pthread_mutex_destroy(&px->turn_mu);
        free(px);
        curl_global_cleanup();
        return grc == CAL_OK ? CAL_EIO : grc;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(px->d, MHD_DAEMON_INFO_BIND_PORT);
    px->port = di ? di->port : cfg->port;
    *out = px;
    return CAL_OK;
}

int cal_proxy_port(const cal_proxy *p) { return p ? p->port : 0; }

void cal_proxy_close(cal_proxy **pp)
{
    if (!pp || !*pp) return;
    cal_proxy *px = *pp;
    atomic_store(&px->stopping, 1);
    MHD_stop_daemon(px->d);
    cal_guard_close(&px->guard);   /* after the daemon: it reports each close */
    pthread_mutex_destroy(&px->turn_mu);
    free(px);
    curl_global_cleanup();
    *pp = NULL;
}
