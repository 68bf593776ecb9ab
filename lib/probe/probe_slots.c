/* The probe's requests, one slot each: a curl easy handle reused from
 * request to request, the body built from the template, the bytes parsed
 * as they arrive (SSE events, a JSON body, an error body), the connections
 * opened ahead of the start, and the end that classifies what happened. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "state.h"

/* ---- a request's limits ----------------------------------------------- */

int64_t cal_probe_request_timeout_ns(const cal_probe_config *cfg, int max_tokens)
{
    if (cfg && cfg->request_timeout_ns > 0) return cfg->request_timeout_ns;
    int64_t conn = cfg && cfg->connect_timeout_ns > 0 ? cfg->connect_timeout_ns : DEFAULT_CONNECT_NS;
    int64_t idle = cfg && cfg->idle_timeout_ns > 0 ? cfg->idle_timeout_ns : DEFAULT_IDLE_NS;
    int64_t tokens = max_tokens > 0 ? max_tokens : UNSIZED_TOKENS;
    return sat_add(sat_add(conn, idle), tokens * PER_TOKEN_NS);   /* < 2^31 s: no overflow */
}

int cal_probe_max_chunks(int max_tokens)
{
    if (max_tokens <= 0) return UNSIZED_CHUNKS;
    int64_t c = 4 * (int64_t)max_tokens + 256;
    return c > MAX_CHUNKS ? MAX_CHUNKS : (int)c;
}

/* ---- per-request parsing ----------------------------------------------- */

static void set_fail(slot *s, cal_req_status st, const char *fmt, const char *arg)
{
    if (s->fail >= 0) return;
    s->fail = (int)st;
    s->fail_ns = s->now;
    snprintf(s->fail_msg, sizeof s->fail_msg, fmt, arg ? arg : "");
}

static int push_chunk(slot *s, int64_t send_ns)
{
    cal_req_result *res = s->res;
    const cal_probe_config *cfg = &s->r->p->cfg;
    /* a stream that never ends is cut here, kept or not: chunk_ns stays
     * [n_chunks], and past the cap the request fails instead */
    if (res->n_chunks >= s->max_chunks) return CAL_ETOOBIG;
    if (cfg->keep_chunks || cfg->keep_send_ns) {
        if (res->n_chunks >= s->chunk_cap) {    /* grow geometrically, up to the cap */
            int nc = s->chunk_cap ? (s->chunk_cap > s->max_chunks / 2 ? s->max_chunks
                                                                       : s->chunk_cap * 2)
                                  : (s->max_chunks < 64 ? s->max_chunks : 64);
            if (cfg->keep_chunks) {
                int64_t *a = realloc(res->chunk_ns, (size_t)nc * sizeof *a);
                if (!a) return CAL_ENOMEM;
                res->chunk_ns = a;
            }
            if (cfg->keep_send_ns) {
                int64_t *a = realloc(res->chunk_send_ns, (size_t)nc * sizeof *a);
                if (!a) return CAL_ENOMEM;
                res->chunk_send_ns = a;
            }
            s->chunk_cap = nc;
        }
        if (cfg->keep_chunks) res->chunk_ns[res->n_chunks] = s->now;
        if (cfg->keep_send_ns) res->chunk_send_ns[res->n_chunks] = send_ns;
    }
    if (res->first_token_ns == 0) res->first_token_ns = s->now;
    res->last_token_ns = s->now;
    res->n_chunks++;
    return CAL_OK;
}

static void apply_chunk(slot *s, const cal_chunk *c)
{
    cal_req_result *res = s->res;
    s->r->st->implausible += c->implausible;
    if (c->flags & CAL_CHUNK_USAGE) {
        s->usage_seen = 1;
        res->output_tokens = c->completion_tokens;
        if (c->prompt_tokens >= 0) res->prompt_tokens = c->prompt_tokens;
    }
    if (c->cached_tokens >= 0) res->cached_tokens = c->cached_tokens;
    if (c->flags & CAL_CHUNK_TIMINGS) {
        res->server_prefill_ms = c->prefill_ms;
        res->server_decode_ms = c->decode_ms;
        res->server_decode_tokens = c->decode_tokens;
    }
    if (c->flags & CAL_CHUNK_FINISH) s->finish_seen = 1;
}

/* Interpret one event whose bytes arrived at s->now. */
int cal_probe_interpret(slot *s, const char *data, size_t len)
{
    if (s->done_seen) return CAL_OK;            /* anything after [DONE] */
    cal_chunk c;
    int rc = cal_chunk_parse(data, len, &c, s->r->p->cfg.keep_text ? &s->text : NULL);
    if (rc == CAL_ENOMEM) {         /* the probe's failure, not the server's */
        set_fail(s, CAL_REQ_CANCELLED, "%scancelled: out of memory interpreting an event", "");
        return rc;
    }
    if (rc == CAL_EPROTO) {
        char head[64];
        size_t n = len < sizeof head - 1 ? len : sizeof head - 1;
        for (size_t i = 0; i < n; i++)
            head[i] = (data[i] >= 32 && data[i] < 127) ? data[i] : '?';
        head[n] = '\0';
        set_fail(s, CAL_REQ_STREAM_ERROR, "malformed event: %s", head);
        return CAL_EPROTO;
    }
    if (c.flags & CAL_CHUNK_DONE) { s->done_seen = 1; return CAL_OK; }
    if (c.flags & CAL_CHUNK_ERROR) {
        set_fail(s, CAL_REQ_STREAM_ERROR, "error event: %s", c.error);
        return CAL_EPROTO;
    }
    if (c.flags & CAL_CHUNK_TEXT) {
        int prc = push_chunk(s, c.send_ns);
        if (prc) {
            char m[160];
            if (prc == CAL_ETOOBIG)
                snprintf(m, sizeof m, "server sent more than asked: over %d content chunks "
                         "for max_tokens %d", s->max_chunks, s->max_tokens);
            else
                snprintf(m, sizeof m, "cancelled: out of memory for chunk timestamps");
            set_fail(s, prc == CAL_ETOOBIG ? CAL_REQ_STREAM_ERROR : CAL_REQ_CANCELLED, "%s", m);
            return prc;
        }
    }
    apply_chunk(s, &c);
    return CAL_OK;
}

/* Interpret s's waiting events in arrival order, each with its own stamp.
 * Stops at the first one that decides a failure (s->fail is then set, as
 * inline interpretation would have ended the transfer there) and returns
 * that code. */
int cal_probe_flush_slot(slot *s)
{
    int rc = CAL_OK;
    int64_t keep = s->now;
    for (int i = 0; i < s->npev && rc == CAL_OK && s->fail < 0; i++) {
        s->now = s->pev[i].ns;
        rc = cal_probe_interpret(s, s->pend.data + s->pev[i].off, s->pev[i].len);
    }
    s->now = keep;
    s->r->pend_bytes -= s->pend.len;
    cal_buf_reset(&s->pend);
    s->npev = 0;
    return rc;
}

/* One SSE event. The write callback's stamp (s->now) is already taken; the
 * JSON interpretation (a jansson tree per event, the costliest step) waits
 * until the loop finds nothing to read or the request ends, so that one
 * wakeup finding many sockets ready stamps them all before it parses any.
 * Each waiting event keeps its own stamp, so chunk_ns, first_token_ns,
 * counts and statuses are what inline interpretation gives. A wakeup with
 * one socket ready has nobody to delay: its events are interpreted at once
 * (no copy, no extra look at the epoll set). */
static int on_event(void *ud, const char *data, size_t len)
{
    slot *s = ud;
    run *r = s->r;
    r->st->chunks++;
    if (s->done_seen && !s->npev) return CAL_OK;   /* anything after [DONE] */
    if (r->defer && s->npev < PEND_MAX_EVENTS && s->pend.len + len <= PEND_MAX_BYTES
        && r->pend_bytes + len <= PEND_RUN_BYTES) {
        if (s->npev == s->pev_cap) {
            int nc = s->pev_cap ? s->pev_cap * 2 : 16;
            struct pend_ev *a = realloc(s->pev, (size_t)nc * sizeof *a);
            if (!a) goto inline_now;
            s->pev = a;
            s->pev_cap = nc;
        }
        size_t off = s->pend.len;
        if (cal_buf_append(&s->pend, data, len) != CAL_OK) goto inline_now;
        s->pev[s->npev++] = (struct pend_ev){ s->now, off, len };
        r->pend_bytes += len;
        if (!s->queued) {
            assert(r->ndirty < r->nslots);      /* each slot at most once */
            s->queued = 1;
            r->dirty[r->ndirty++] = s;
        }
        return CAL_OK;
    }
inline_now:;                       /* one socket ready, or over a cap: in order, now */
    int rc = cal_probe_flush_slot(s);
    return rc ? rc : cal_probe_interpret(s, data, len);
}

static void append_capped(cal_buf *b, const char *p, size_t n)
{
    size_t room = b->max - b->len;
    cal_buf_append(b, p, n < room ? n : room);
}

static size_t on_header(char *ptr, size_t sz, size_t nm, void *ud)
{
    int64_t now = cal_now_ns();
    slot *s = ud;
    s->last_byte_ns = now;
    if (!s->res->first_byte_ns) s->res->first_byte_ns = now;
    s->r->st->bytes += (int64_t)(sz * nm);
    (void)ptr;
    return sz * nm;
}

static size_t on_write(char *ptr, size_t sz, size_t nm, void *ud)
{
    int64_t now = cal_now_ns();                 /* before any parsing */
    slot *s = ud;
    size_t n = sz * nm;
    s->now = now;
    s->last_byte_ns = now;
    s->r->st->bytes += (int64_t)n;
    if (s->mode == MODE_UNKNOWN) {
        long code = 0;
        char *ct = NULL;
        curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_getinfo(s->easy, CURLINFO_CONTENT_TYPE, &ct);
        s->res->http_status = (int)code;
        if (code < 200 || code >= 300) {
            s->mode = MODE_ERRBODY;
            s->in.max = MAX_ERROR_BYTES;
        } else if (ct && strstr(ct, "event-stream")) {
            s->mode = MODE_SSE;
        } else {
            /* a server that ignored stream:true answers with one JSON body */
            size_t i = 0;
            while (i < n && (ptr[i] == ' ' || ptr[i] == '\n' || ptr[i] == '\r' || ptr[i] == '\t')) i++;
            int json = (ct && strstr(ct, "json")) || (i < n && ptr[i] == '{');
            s->mode = json ? MODE_JSON : MODE_SSE;
            s->in.max = MAX_JSON_BYTES;
        }
    }
    switch (s->mode) {
    case MODE_ERRBODY:
        append_capped(&s->in, ptr, n);
        return n;
    case MODE_JSON: {
        int brc = cal_buf_append(&s->in, ptr, n);
        if (brc == CAL_ENOMEM)      /* the probe's failure, not the server's */
            set_fail(s, CAL_REQ_CANCELLED, "%scancelled: out of memory for the response body", "");
        else if (brc)
            set_fail(s, CAL_REQ_STREAM_ERROR, "%sresponse body over its cap", "");
        return brc ? 0 : n;
    }
    default: break;
    }
    int rc = cal_sse_feed(s->sse, ptr, n);
    if (rc == CAL_ETOOBIG) set_fail(s, CAL_REQ_STREAM_ERROR, "%sSSE event over its cap", "");
    else if (rc == CAL_ENOMEM) set_fail(s, CAL_REQ_CANCELLED, "%scancelled: out of memory for the stream", "");
    else if (rc) set_fail(s, CAL_REQ_STREAM_ERROR, "%smalformed stream", "");
    return rc ? 0 : n;
}

/* ---- connections opened ahead ---------------------------------------- */

/* Whether a and b name the same address and port. */
static int same_addr(const struct sockaddr *a, socklen_t al, const struct sockaddr_storage *b,
                     socklen_t bl)
{
    if (al < sizeof(sa_family_t) || bl < sizeof(sa_family_t) || a->sa_family != b->ss_family) return 0;
    if (a->sa_family == AF_INET && al >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (a->sa_family == AF_INET6 && al >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
        return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id
               && memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    return 0;
}

/* curl wants a socket for a new connection: one opened ahead when it is for
 * the address they were opened to, else a fresh one (what curl does). */
static curl_socket_t on_opensocket(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
    run *r = ud;
    r->ahead_given = -1;
    if (purpose == CURLSOCKTYPE_IPCXN && r->nahead
        && same_addr(&a->addr, a->addrlen, &r->ahead_sa, r->ahead_salen)) {
        int fd = r->ahead[--r->nahead];
        r->ahead_given = fd;
        r->st->used_ahead++;
        return fd;
    }
    return socket(a->family, a->socktype, a->protocol);
}

/* ... and curl skips connect() for the one handed out */
static int on_sockopt(void *ud, curl_socket_t fd, curlsocktype purpose)
{
    run *r = ud;
    (void)purpose;
    if (r->ahead_given >= 0 && fd == r->ahead_given) {
        r->ahead_given = -1;
        return CURL_SOCKOPT_ALREADY_CONNECTED;
    }
    return CURL_SOCKOPT_OK;
}

/* A proxy variable libcurl reads: the connections would go there. */
static int proxy_set(void)
{
    static const char *const v[] = { "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                                     "all_proxy", "ALL_PROXY" };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        const char *e = getenv(v[i]);
        if (e && *e) return 1;
    }
    return 0;
}

/* The address p->url's host and port resolve to first (the one curl tries
 * first). 0 ok, -1 not resolved. */
static int url_addr(const cal_probe *p, struct sockaddr_storage *sa, socklen_t *len)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL;
    int ok = u && !curl_url_set(u, CURLUPART_URL, p->url, 0)
             && !curl_url_get(u, CURLUPART_HOST, &host, 0)
             && !curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
    struct addrinfo *ai = NULL;
    if (ok) {
        char h[256];
        size_t hl = strlen(host);
        if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') { host[hl - 1] = '\0'; memmove(host, host + 1, hl - 1); }
        snprintf(h, sizeof h, "%s", host);
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
        ok = getaddrinfo(h, port, &hints, &ai) == 0 && ai && ai->ai_addrlen <= sizeof *sa;
    }
    if (ok) {
        memcpy(sa, ai->ai_addr, ai->ai_addrlen);
        *len = ai->ai_addrlen;
    }
    if (ai) freeaddrinfo(ai);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return ok ? 0 : -1;
}

/* Open up to want TCP connections to the target, AHEAD_BATCH at a time,
 * within the connect timeout; keep those that connected in r->ahead. One
 * that fails ends the opening (its requests then connect as they go out,
 * and fail there with the status a failed connect has). */
void cal_probe_connect_ahead(run *r, size_t want)
{
    if (!want || proxy_set() || url_addr(r->p, &r->ahead_sa, &r->ahead_salen)) return;
    r->ahead = malloc(want * sizeof *r->ahead);
    struct pollfd *pf = malloc(AHEAD_BATCH * sizeof *pf);
    if (!r->ahead || !pf) { free(pf); return; }
    int64_t end = cal_now_ns() + r->p->cfg.connect_timeout_ns;
    size_t started = 0;
    int npf = 0, failed = 0;
    while ((!failed && started < want) || npf) {
        while (!failed && started < want && npf < AHEAD_BATCH) {
            /* fcntl, not SOCK_NONBLOCK | SOCK_CLOEXEC: the POSIX core has no
             * Linux-only socket flags (lib/platform) */
            int fd = socket(r->ahead_sa.ss_family, SOCK_STREAM, 0);
            if (fd >= 0 && (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 ||
                            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)) {
                close(fd);
                fd = -1;
            }
            if (fd < 0) { failed = 1; break; }
            int one = 1;
            if (r->ahead_sa.ss_family == AF_INET || r->ahead_sa.ss_family == AF_INET6)
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            started++;
            if (connect(fd, (struct sockaddr *)&r->ahead_sa, r->ahead_salen) == 0) {
                r->ahead[r->nahead++] = fd;
            } else if (errno == EINPROGRESS) {
                pf[npf++] = (struct pollfd){ .fd = fd, .events = POLLOUT };
            } else {
                close(fd);
                failed = 1;
            }
        }
        int64_t left = end - cal_now_ns();
        if (left <= 0) break;
        if (!npf) continue;
        int rc = poll(pf, (nfds_t)npf, (int)((left + 999999) / 1000000));
        if (rc < 0 && errno != EINTR) break;
        int k = 0;
        for (int i = 0; i < npf; i++) {
            if (!pf[i].revents) { pf[k++] = pf[i]; continue; }
            int err = 0;
            socklen_t el = sizeof err;
            if (getsockopt(pf[i].fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0) {
                r->ahead[r->nahead++] = pf[i].fd;
            } else {
                close(pf[i].fd);
                failed = 1;
            }
        }
        npf = k;
    }
    for (int i = 0; i < npf; i++) close(pf[i].fd);   /* not connected in time */
    free(pf);
    r->st->connected_ahead = (int)r->nahead;
}

/* The slot list's invariants: every slot ever made is in r->slots; a slot is
 * either free (on r->freel, once, with no request) or holds one request in
 * flight (res set), so nfree + in_flight == nslots between requests. */
void cal_probe_slot_put(run *r, slot *s)
{
    assert(s->res == NULL);
    assert(!s->on_free);
    assert(r->nfree < r->nslots);
    s->on_free = 1;
    r->freel[r->nfree++] = s;
}

/* libcurl runs this each time it sends the request: a retry on a fresh
 * connection runs it again. */
static int on_prereq(void *ud, char *conn_primary_ip, char *conn_local_ip,
                     int conn_primary_port, int conn_local_port)
{
    (void)conn_primary_ip; (void)conn_local_ip; (void)conn_primary_port; (void)conn_local_port;
    ((slot *)ud)->sends++;
    return CURL_PREREQFUNC_OK;
}

/* A slot's handle options that hold for every request it carries. */
static void slot_setopts(run *r, slot *s)
{
    const cal_probe *p = r->p;
    CURL *e = s->easy;
    curl_easy_setopt(e, CURLOPT_URL, p->url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, p->headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, s);
    curl_easy_setopt(e, CURLOPT_PRIVATE, s);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)((p->cfg.connect_timeout_ns + 999999) / 1000000));
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_opensocket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, r);
    curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
    curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, r);
    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, s);
}

slot *cal_probe_slot_get(run *r)
{
    if (r->nfree) {
        slot *s = r->freel[--r->nfree];
        assert(s->on_free && s->res == NULL);
        s->on_free = 0;
        return s;
    }
    slot *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->r = r;
    s->sh = &r->shards[r->nslots % (size_t)r->nshards];   /* round robin */
    s->in = (cal_buf)CAL_BUF_INIT(MAX_JSON_BYTES);
    s->text = (cal_buf)CAL_BUF_INIT(MAX_TEXT_BYTES);
    s->pend = (cal_buf)CAL_BUF_INIT(PEND_MAX_BYTES);
    s->easy = curl_easy_init();
    if (!s->easy || cal_sse_open(MAX_EVENT_BYTES, on_event, s, &s->sse)) {
        if (s->easy) curl_easy_cleanup(s->easy);
        free(s);
        return NULL;
    }
    CURL *e = s->easy;
    slot_setopts(r, s);
    if (r->nslots % 64 == 0) {
        slot **a = realloc(r->slots, (r->nslots + 64) * sizeof *a);
        slot **f = realloc(r->freel, (r->nslots + 64) * sizeof *f);
        if (a) r->slots = a;
        if (f) r->freel = f;
        slot **d = a && f ? realloc(r->dirty, (r->nslots + 64) * sizeof *d) : NULL;
        if (d) r->dirty = d;
        if (!a || !f || !d) { cal_sse_close(&s->sse); curl_easy_cleanup(e); free(s); return NULL; }
    }
    r->slots[r->nslots++] = s;
    return s;
}

void cal_probe_slot_free(slot *s)
{
    if (!s) return;
    curl_easy_cleanup(s->easy);
    cal_sse_close(&s->sse);
    cal_buf_free(&s->in);
    cal_buf_free(&s->text);
    cal_buf_free(&s->pend);
    free(s->pev);
    free(s->body);
    free(s);
}

char *cal_probe_dup_msg(const char *s, size_t n)
{
    char *m = malloc(n + 1);
    if (!m) return NULL;
    memcpy(m, s, n);
    m[n] = '\0';
    return m;
}

/* Decide the one status of a finished transfer (curl result rc). */
void cal_probe_classify(slot *s, CURLcode rc)
{
    cal_req_result *res = s->res;
    long code = 0;
    s->curl_ok = rc == CURLE_OK;
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
    if (code) res->http_status = (int)code;
    res->end_ns = s->fail >= 0 ? s->fail_ns : s->last_byte_ns;
    const char *msg = NULL;
    char tmp[320];
    if (s->fail >= 0) {
        res->status = (cal_req_status)s->fail;
        msg = s->fail_msg;
    } else if (res->http_status && (res->http_status < 200 || res->http_status >= 300)) {
        res->status = CAL_REQ_HTTP_ERROR;
        if (s->in.len) res->error = cal_probe_dup_msg(s->in.data, s->in.len);
        else { snprintf(tmp, sizeof tmp, "HTTP %d with an empty body", res->http_status); msg = tmp; }
    } else if (rc == CURLE_OK) {
        if (s->mode == MODE_JSON) {
            cal_chunk c;
            int prc = cal_chunk_parse(s->in.data ? s->in.data : "", s->in.len, &c,
                                      s->r->p->cfg.keep_text ? &s->text : NULL);
            if (prc == CAL_ENOMEM) {
                res->status = CAL_REQ_CANCELLED;
                msg = "cancelled: out of memory interpreting the body";
            } else if (prc == CAL_EPROTO) {
                res->status = CAL_REQ_STREAM_ERROR;
                msg = "response body is not a JSON object";
            } else if (c.flags & CAL_CHUNK_ERROR) {
                res->status = CAL_REQ_STREAM_ERROR;
                snprintf(tmp, sizeof tmp, "error body: %s", c.error);
                msg = tmp;
            } else {
                /* The whole answer arrived at once: first = last = end. */
                s->now = s->last_byte_ns;
                if ((c.flags & CAL_CHUNK_TEXT) && push_chunk(s, c.send_ns) != CAL_OK) {
                    res->status = CAL_REQ_CANCELLED;
                    msg = "cancelled: out of memory for chunk timestamps";
                } else {
                    apply_chunk(s, &c);
                    res->status = CAL_REQ_OK;
                }
            }
        } else {
            int clean = cal_sse_finish(s->sse) == CAL_OK;
            if (s->mode == MODE_UNKNOWN) {
                res->status = CAL_REQ_STREAM_ERROR;
                msg = "empty response body";
            } else if (s->done_seen) {
                res->status = CAL_REQ_OK;
            } else if (!clean) {
                res->status = CAL_REQ_STREAM_ERROR;
                msg = "stream truncated inside an event";
            } else if (s->finish_seen || s->usage_seen) {
                res->status = CAL_REQ_OK;      /* complete, only [DONE] missing */
            } else {
                res->status = CAL_REQ_STREAM_ERROR;
                msg = "stream closed without [DONE] or finish_reason";
            }
        }
    } else {
        switch (rc) {
        case CURLE_OPERATION_TIMEDOUT:
            res->status = CAL_REQ_TIMEOUT; break;
        case CURLE_COULDNT_CONNECT: case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
            res->status = CAL_REQ_CONNECT_ERROR; break;
        case CURLE_GOT_NOTHING: case CURLE_SEND_ERROR: case CURLE_RECV_ERROR:
            /* reset before any reply byte is a connection failure; after the
             * status line it cuts a stream */
            res->status = res->first_byte_ns ? CAL_REQ_STREAM_ERROR : CAL_REQ_CONNECT_ERROR;
            break;
        default:
            res->status = CAL_REQ_STREAM_ERROR; break;
        }
        snprintf(tmp, sizeof tmp, "%s", s->errbuf[0] ? s->errbuf : curl_easy_strerror(rc));
        msg = tmp;
    }
    if (msg && !res->error) res->error = cal_probe_dup_msg(msg, strlen(msg));
}

/* Fill the token fields and hand the slot back. */
void cal_probe_finish_slot(run *r, slot *s)
{
    cal_req_result *res = s->res;
    if (s->usage_seen && res->output_tokens >= 0) {
        res->tok_source = CAL_TOKSRC_USAGE;
    } else {
        res->tok_source = CAL_TOKSRC_CHUNKS;
        res->output_tokens = res->n_chunks;
    }
    if (r->p->cfg.keep_text && s->text.len) {
        res->text = cal_probe_dup_msg(s->text.data, s->text.len);
        if (!res->text && res->status == CAL_REQ_OK) {   /* never ok without what was kept */
            static const char m[] = "cancelled: out of memory for the generated text";
            res->status = CAL_REQ_CANCELLED;
            if (!res->error) res->error = cal_probe_dup_msg(m, sizeof m - 1);
        }
    }
    if (r->load->on_end) {
        size_t j = (size_t)(res - r->res0);
        r->load->on_end(r->load->on_end_ud, r->idx ? r->idx[j] : j, res);
    }
    free(s->body);
    s->body = NULL;
    s->res = NULL;
    assert(r->in_flight > 0);
    r->in_flight--;
    r->done++;
    /* libcurl 7.x counts the retries of a reused connection that died (a
     * server that closes keep-alive connections) over the handle's whole
     * life, not per transfer, and fails the sixth: a long run against
     * llama-server lost a request in about 200 that way (curl 8.17 counts per
     * transfer). A reset handle counts afresh; the connection cache is the
     * multi handle's, so reuse is kept. Only a handle whose count may have
     * moved is reset: one whose request went out more than once, or whose
     * transfer did not end cleanly (a retry whose fresh connect then failed
     * never reaches the pre-request callback). A request sent once that
     * ended CURLE_OK was never retried. The reset and the options set again
     * cost about 4,400 instructions a request (callgrind), 1 % of a 32-chunk
     * stream's. A libcurl without the callback (before 7.80) never counts a
     * send, so every handle is reset there, as before. A run that is ending
     * frees its handles instead. */
    if ((s->sends != 1 || !s->curl_ok) && !r->ending) {
        curl_easy_reset(s->easy);
        slot_setopts(r, s);
        r->st->handle_resets++;
    }
    cal_probe_slot_put(r, s);
    assert(r->nfree + r->in_flight == r->nslots);
}

/* End an in-flight request now with status st (idle timeout, cancel). */
void cal_probe_end_now(run *r, slot *s, cal_req_status st, const char *msg)
{
    curl_multi_remove_handle(s->sh->multi, s->easy);
    if (cal_probe_flush_slot(s) != CAL_OK && s->fail >= 0) {
        /* a waiting event had already ended it (inline, the transfer would
         * have stopped there) */
        cal_probe_classify(s, CURLE_WRITE_ERROR);
        cal_probe_finish_slot(r, s);
        return;
    }
    cal_sse_finish(s->sse);
    s->res->status = st;
    s->res->end_ns = cal_now_ns();
    if (msg) s->res->error = cal_probe_dup_msg(msg, strlen(msg));
    cal_probe_finish_slot(r, s);
}

/* The request body: the template, then the prompt and max_tokens. NULL when
 * out of memory (every set is checked: a body missing its prompt must never
 * go out). */
static char *make_body(const cal_probe *p, json_t *tmpl, const cal_request *rq)
{
    json_t *o = json_copy(tmpl);
    if (!o) return NULL;
    int bad;
    if (p->cfg.api == CAL_API_CHAT) {
        json_t *msgs = json_array(), *m = json_object();
        bad = json_array_append_new(msgs, m) != 0;           /* msgs owns m now */
        if (!bad) bad = json_object_set_new(m, "role", json_string("user"))
                        || json_object_set_new(m, "content", json_string(rq->prompt));
        bad = json_object_set_new(o, "messages", msgs) || bad;   /* o owns msgs */
    } else {
        bad = json_object_set_new(o, "prompt", json_string(rq->prompt)) != 0;
    }
    if (!bad && rq->max_tokens > 0) {
        bad = json_object_set_new(o, "max_tokens", json_integer(rq->max_tokens))
              || (p->cfg.ignore_eos && json_object_set_new(o, "min_tokens", json_integer(rq->max_tokens)));
    }
    char *body = bad ? NULL : json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return body;
}

/* The body for rq: a request with the same prompt and max_tokens as the last
 * one built (a fixed prompt, a warm-up, a repeated shot) takes a copy of its
 * bytes; jansson's dump costs about 35,000 instructions for a 300-byte
 * prompt, half a stream's chunks' worth of work at 2048 streams. NULL when out
 * of memory. */
char *cal_probe_body_for(run *r, const cal_request *rq)
{
    if (r->body_last && r->body_max == rq->max_tokens
        && rq->prompt && strcmp(r->body_prompt, rq->prompt) == 0)
        return cal_probe_dup_msg(r->body_last, r->body_len);
    char *body = make_body(r->p, r->tmpl, rq);
    if (!body) return NULL;
    size_t len = strlen(body);
    char *keep = cal_probe_dup_msg(body, len), *prompt = strdup(rq->prompt);
    if (keep && prompt) {                       /* else the old entry stays, still true */
        free(r->body_last);
        free(r->body_prompt);
        r->body_last = keep;
        r->body_len = len;
        r->body_prompt = prompt;
        r->body_max = rq->max_tokens;
    } else {
        free(keep);
        free(prompt);
    }
    return body;
}

int cal_probe_start_request(run *r, size_t j, const cal_request *rq, cal_req_result *res,
                         int64_t sched_ns, double *lags, size_t *nlags)
{
    /* the body first: a slot is taken only for a request that goes out */
    char *body;
    if (j < r->nbody0 && r->body0[j]) {         /* built before the start */
        body = r->body0[j];
        r->body0[j] = NULL;
    } else {
        body = cal_probe_body_for(r, rq);
    }
    if (!body) return CAL_ENOMEM;
    slot *s = cal_probe_slot_get(r);
    if (!s) { free(body); return CAL_ENOMEM; }
    s->res = res;
    s->body = body;
    s->mode = MODE_UNKNOWN;
    s->done_seen = s->finish_seen = s->usage_seen = 0;
    s->fail = -1;
    s->fail_msg[0] = '\0';
    s->errbuf[0] = '\0';
    s->chunk_cap = 0;
    s->sends = 0;
    s->curl_ok = 0;
    s->fail_ns = 0;
    s->max_tokens = rq->max_tokens;
    s->max_chunks = cal_probe_max_chunks(rq->max_tokens);
    r->pend_bytes -= s->pend.len;               /* empty unless a run failed */
    cal_buf_reset(&s->pend);
    s->npev = 0;
    cal_sse_finish(s->sse);                     /* drop what a failed stream left */
    cal_buf_reset(&s->in);
    s->in.max = MAX_JSON_BYTES;
    cal_buf_reset(&s->text);
    res->sched_ns = sched_ns;
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->body);
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(s->body));

    res->send_ns = cal_now_ns();
    s->last_byte_ns = res->send_ns;
    s->deadline_ns = sat_add(res->send_ns, cal_probe_request_timeout_ns(&r->p->cfg, rq->max_tokens));
    if (s->deadline_ns < r->next_scan) r->next_scan = s->deadline_ns;
    lags[(*nlags)++] = (double)(res->send_ns - sched_ns) / 1e6;
    r->in_flight++;
    assert(r->nfree + r->in_flight == r->nslots);
    if ((int)r->in_flight > r->st->max_in_flight) r->st->max_in_flight = (int)r->in_flight;
    if (curl_multi_add_handle(s->sh->multi, s->easy) != CURLM_OK) {
        res->status = CAL_REQ_CONNECT_ERROR;
        res->error = cal_probe_dup_msg("could not add the transfer", 26);
        res->end_ns = cal_now_ns();
        cal_probe_finish_slot(r, s);
        return 1;                               /* ended at once: caller frees its slot */
    }
    return CAL_OK;
}

