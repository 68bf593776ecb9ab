/* The probe: libcurl's multi interface in event-driven form (socket_action
 * over one readiness set, O(active sockets) per wakeup with epoll or kqueue,
 * so 2048 streams cost what their traffic costs; curl_multi_poll would walk
 * every transfer on each wakeup). One event loop drives its share of the
 * requests from one thread; --loops N runs N of them, each with its own
 * curl multi handles and readiness set, and merges their results. Each
 * write callback stamps CLOCK_MONOTONIC before it parses anything, whichever
 * backend (loop.h) waited. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>
#include <jansson.h>
#include "caliper/buf.h"
#include "caliper/clock.h"
#include "caliper/utf8.h"
#include "caliper/error.h"
#include "caliper/global.h"
#include "caliper/auth.h"
#include "caliper/probe.h"
#include "caliper/stats.h"
#include "lib/util/c_locale.h"
#include "loop.h"

#define MAX_EVENT_BYTES   ((size_t)1 << 20)   /* one SSE event */
#define MAX_ERROR_BYTES   ((size_t)4096)      /* kept error body */
#define MAX_JSON_BYTES    ((size_t)16 << 20)  /* a non-streaming body */
#define MAX_TEXT_BYTES    ((size_t)16 << 20)  /* kept generated text */
#define MAX_CHUNKS        (1 << 22)           /* content chunks per request, at most */
#define UNSIZED_CHUNKS    (1 << 20)           /* ... when max_tokens is left to the server */
#define DEFAULT_CONNECT_NS (10LL * 1000000000)
#define DEFAULT_IDLE_NS    (60LL * 1000000000)
#define PER_TOKEN_NS       (1000000000LL)      /* request deadline: 1 s a token */
#define UNSIZED_TOKENS     4096                /* ... when max_tokens <= 0 */
#define MAX_WAIT_NS        (100LL * 1000000)  /* longest sleep between checks */
/* Transfers per curl multi handle. libcurl 7.x looks for a reusable
 * connection by walking every connection to the host, so one multi with 2048
 * streams pays O(n) per request (measured: ~90 µs each, 0.18 s for the first
 * 2048). Shards of 64 keep that walk short; all shards share one epoll set
 * and one thread. */
#define SHARD_TRANSFERS    64
/* Deferred interpretation (see on_event): events wait, bytes and stamp kept,
 * until the loop has nothing to read or the request ends. Caps per request
 * and per run; past one, the request's waiting events are interpreted at once. */
#define PEND_MAX_EVENTS    256
#define PEND_MAX_BYTES     ((size_t)64 << 10)
#define PEND_RUN_BYTES     ((size_t)8 << 20)
#define FLUSH_BUDGET       8        /* events interpreted between looks */
#define DEFER_MIN_READY    2        /* sockets ready at once for events to wait */
/* Connections opened ahead are started this many at a time: a listen
 * backlog that overflows drops SYNs, and a dropped SYN costs a 1 s retry. */
#define AHEAD_BATCH        128

const char *cal_req_status_name(cal_req_status s)
{
    static const char *names[CAL_REQ_N_STATUS] = {
        "ok", "http_error", "timeout", "connect_error", "stream_error", "cancelled"};
    return (unsigned)s < CAL_REQ_N_STATUS ? names[s] : "unknown";
}

void cal_req_result_free(cal_req_result *r)
{
    if (!r) return;
    free(r->error);
    free(r->chunk_ns);
    free(r->chunk_send_ns);
    free(r->text);
    r->error = r->text = NULL;
    r->chunk_ns = r->chunk_send_ns = NULL;
}

struct cal_probe {
    cal_probe_config cfg;        /* strings below are owned copies */
    char    *url;
    json_t  *tmpl;               /* the body without prompt and max_tokens */
    struct curl_slist *headers;
    const cal_loop_ops *loop_ops; /* the event-loop backend (CALIPER_LOOP) */
};

static int64_t sat_add(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

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

int cal_probe_failure_summary(const cal_probe_stats *st, char *buf, size_t size)
{
    if (buf && size) buf[0] = '\0';
    if (!st) return 0;
    int failed = 0;
    size_t o = 0;
    for (int k = 0; k < CAL_REQ_N_STATUS; k++) {
        if (k == CAL_REQ_OK || k == CAL_REQ_CANCELLED || st->n_status[k] <= 0) continue;
        failed += st->n_status[k];
        if (buf && o < size) {
            int w = snprintf(buf + o, size - o, "%s%d %s", o ? ", " : "", st->n_status[k],
                             cal_req_status_name((cal_req_status)k));
            o += w > 0 ? (size_t)w : 0;
        }
    }
    if (failed && st->first_fail >= 0 && buf && o < size)
        snprintf(buf + o, size - o, "; first (request %d): %s", st->first_fail,
                 st->first_fail_msg[0] ? st->first_fail_msg : "no message");
    return failed;
}

enum { MODE_UNKNOWN, MODE_SSE, MODE_JSON, MODE_ERRBODY };

typedef struct run run;
typedef struct shard {
    run     *r;
    CURLM   *multi;
    int      idx;
    int64_t  timer_at;           /* curl's timer, absolute ns; -1 none */
    int      touched;            /* on run.touched: curl ran it this wakeup */
} shard;

typedef struct slot {
    CURL    *easy;
    cal_sse *sse;
    run     *r;
    shard   *sh;                 /* the multi handle this slot's transfers use */
    cal_req_result *res;
    char    *body;               /* request body (json_dumps) */
    cal_buf  in;                 /* error body or non-streaming body */
    cal_buf  text;               /* generated text, when kept */
    int      mode;
    int      done_seen, finish_seen, usage_seen;
    int      fail;               /* a status decided while parsing, or -1 */
    char     fail_msg[320];
    int64_t  now;                /* the stamp of the bytes being parsed */
    int64_t  fail_ns;            /* the stamp of the bytes that decided fail */
    cal_buf  pend;               /* data of events not yet interpreted */
    struct pend_ev { int64_t ns; size_t off, len; } *pev;   /* their stamps */
    int      npev, pev_cap;
    int      queued;             /* on run.dirty */
    int64_t  last_byte_ns;
    int64_t  deadline_ns;        /* send + the request timeout */
    int      max_tokens;         /* the request's, for messages */
    int      max_chunks;         /* cal_probe_max_chunks(max_tokens) */
    int      on_free;            /* in run.freel (then res is NULL) */
    int      chunk_cap;
    char     errbuf[CURL_ERROR_SIZE];
} slot;

struct run {
    cal_probe *p;
    const cal_load *load;        /* its on_end hook (--keep-chunks) */
    const cal_req_result *res0;  /* this loop's results[0] */
    const size_t *idx;           /* its j-th request is the caller's idx[j]; NULL: j */
    shard   *shards;
    int      nshards;
    int     *touched;            /* shards curl ran since the last drain [ntouched] */
    int      ntouched;
    int64_t  timer_min;          /* the earliest shard timer (-1 none), when not stale */
    int      timer_stale;        /* a timer moved later or went: look at all shards */
    cal_loop *loop;              /* this loop's readiness set */
    json_t  *tmpl;               /* this loop's copy of the body template */
    char    *body_last;          /* the last body built [body_len], for ... */
    size_t   body_len;
    char    *body_prompt;        /* ... this prompt (a copy: the caller may free
                                  * a prompt once its request ended) */
    int      body_max;           /* ... and max_tokens */
    slot   **slots;              /* all slots ever made */
    size_t   nslots;
    slot   **freel;              /* free slots (stack) */
    size_t   nfree;
    size_t   cap;                /* in-flight cap */
    size_t   in_flight;
    cal_probe_stats *st;
    size_t   done;
    slot   **dirty;              /* slots with waiting events (cap: nslots) */
    size_t   ndirty;
    size_t   pend_bytes;         /* waiting event bytes over all slots */
    int      defer;              /* this wakeup found several sockets ready */
    int64_t  next_scan;          /* when the earliest request could time out */
    /* connections opened ahead (cal_probe_config.no_connect_ahead): connected
     * sockets to ahead_sa, handed to curl by on_opensocket */
    int     *ahead;              /* [nahead], taken from the top */
    size_t   nahead;
    int      ahead_given;        /* the fd on_opensocket handed out last, or -1 */
    struct sockaddr_storage ahead_sa;
    socklen_t ahead_salen;
    char   **body0;              /* the first wave's bodies, built before the
                                    start [nbody0]; taken (NULLed) as sent */
    size_t   nbody0;
};

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static void probe_free(cal_probe *p)
{
    if (!p) return;
    free((char *)p->cfg.base_url);
    free((char *)p->cfg.model);
    free((char *)p->cfg.api_key);
    free((char *)p->cfg.extra_body);
    free(p->url);
    json_decref(p->tmpl);
    curl_slist_free_all(p->headers);
    free(p);
}

int cal_probe_open(const cal_probe_config *cfg, cal_probe **out)
{
    if (!cfg || !out || !cfg->base_url || !*cfg->base_url) return CAL_EINVAL;
    if (cfg->api != CAL_API_COMPLETIONS && cfg->api != CAL_API_CHAT) return CAL_EINVAL;
    if (cfg->connect_timeout_ns < 0 || cfg->idle_timeout_ns < 0 || cfg->request_timeout_ns < 0)
        return CAL_ERANGE;
    char auth[CAL_AUTH_HEADER_MAX];    /* the one bound on an API key (auth.h) */
    int irc = cfg->api_key && *cfg->api_key ? cal_auth_header(cfg->api_key, auth, sizeof auth) : CAL_OK;
    if (!irc) irc = cal_global_init();
    if (irc) return irc;
    cal_probe *p = calloc(1, sizeof *p);
    if (!p) return CAL_ENOMEM;
    p->cfg = *cfg;
    p->cfg.base_url = dup_or_null(cfg->base_url);
    p->cfg.model = dup_or_null(cfg->model);
    p->cfg.api_key = dup_or_null(cfg->api_key);
    p->cfg.extra_body = dup_or_null(cfg->extra_body);
    if (!p->cfg.connect_timeout_ns) p->cfg.connect_timeout_ns = DEFAULT_CONNECT_NS;
    if (!p->cfg.idle_timeout_ns) p->cfg.idle_timeout_ns = DEFAULT_IDLE_NS;
    p->loop_ops = cal_loop_pick(NULL);
    int rc = CAL_ENOMEM;
    if (!p->loop_ops) { rc = CAL_EINVAL; goto fail; }   /* CALIPER_LOOP names none built */
    if (p->cfg.loops == CAL_PROBE_LOOPS_AUTO) p->cfg.loops = cal_probe_default_loops(0);
    if (p->cfg.loops < 0) { rc = CAL_ERANGE; goto fail; }
    if (p->cfg.loops > CAL_PROBE_MAX_LOOPS) p->cfg.loops = CAL_PROBE_MAX_LOOPS;
    if (!p->cfg.base_url || (cfg->model && !p->cfg.model) || (cfg->api_key && !p->cfg.api_key)
        || (cfg->extra_body && !p->cfg.extra_body)) goto fail;

    /* URL: base without trailing '/', "/v1" added unless already there */
    size_t bl = strlen(cfg->base_url);
    while (bl && cfg->base_url[bl - 1] == '/') bl--;
    int has_v1 = bl >= 3 && memcmp(cfg->base_url + bl - 3, "/v1", 3) == 0;
    const char *path = cfg->api == CAL_API_CHAT ? "/chat/completions" : "/completions";
    cal_buf u = CAL_BUF_INIT(4096);
    int be = cal_buf_append(&u, cfg->base_url, bl);
    if (!be) be = cal_buf_puts(&u, has_v1 ? "" : "/v1");
    if (!be) be = cal_buf_puts(&u, path);
    if (be) { cal_buf_free(&u); rc = be == CAL_ENOMEM ? CAL_ENOMEM : CAL_EINVAL; goto fail; }
    p->url = u.data;

    /* body template */
    /* body template: every set is checked, so that no request goes out
     * without a field it was meant to carry (set_new takes the value's
     * reference even when it fails) */
    p->tmpl = json_object();
    if (!p->tmpl) goto fail;
    /* jansson refuses a string that is not UTF-8: that is the caller's
     * input, not a failed allocation */
    if (cfg->model && cal_utf8_check(cfg->model, strlen(cfg->model)) < strlen(cfg->model)) {
        rc = CAL_EINVAL;
        goto fail;
    }
    json_t *so = json_object();
    if ((cfg->model && json_object_set_new(p->tmpl, "model", json_string(cfg->model)))
        || json_object_set_new(p->tmpl, "stream", json_true())
        || json_object_set_new(so, "include_usage", json_true())
        || json_object_set_new(p->tmpl, "stream_options", json_incref(so))
        || (cfg->ignore_eos && json_object_set_new(p->tmpl, "ignore_eos", json_true()))) {
        json_decref(so);
        goto fail;
    }
    json_decref(so);
    if (cfg->extra_body && *cfg->extra_body) {
        json_error_t je;
        json_t *x = json_loads(cfg->extra_body, 0, &je);
        if (!x) x = json_loads(cfg->extra_body, 0, &je);   /* see cal_chunk_parse */
        if (!json_is_object(x)) { json_decref(x); rc = CAL_EINVAL; goto fail; }
        if (json_object_update(p->tmpl, x)) { json_decref(x); goto fail; }
        /* a null in extra_body removes that field (servers that reject
         * stream_options or ignore_eos) */
        const char *key;
        json_t *val;
        json_object_foreach(x, key, val)
            if (json_is_null(val)) json_object_del(p->tmpl, key);
        json_decref(x);
    }

    p->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (!p->headers) goto fail;
    struct curl_slist *h = curl_slist_append(p->headers, "Accept: text/event-stream");
    if (h) h = curl_slist_append(h, "Expect:");   /* no 100-continue round trip */
    if (!h) goto fail;
    if (cfg->api_key && *cfg->api_key) {
        h = curl_slist_append(p->headers, auth);
        if (!h) goto fail;
    }
    *out = p;
    return CAL_OK;
fail:
    probe_free(p);
    return rc;
}

const char *cal_probe_loop_backends(void) { return cal_loop_names(); }

int cal_probe_default_loops(int engine_pid)
{
    int n = cal_loop_cpus(engine_pid);
    return n < 1 ? 1 : n > CAL_PROBE_MAX_LOOPS ? CAL_PROBE_MAX_LOOPS : n;
}

void cal_probe_close(cal_probe **pp)
{
    if (!pp || !*pp) return;
    probe_free(*pp);
    *pp = NULL;
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
static int interpret(slot *s, const char *data, size_t len)
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
static int flush_slot(slot *s)
{
    int rc = CAL_OK;
    int64_t keep = s->now;
    for (int i = 0; i < s->npev && rc == CAL_OK && s->fail < 0; i++) {
        s->now = s->pev[i].ns;
        rc = interpret(s, s->pend.data + s->pev[i].off, s->pev[i].len);
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
    int rc = flush_slot(s);
    return rc ? rc : interpret(s, data, len);
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

/* ---- the event loop ------------------------------------------------------ */

static int on_socket(CURL *e, curl_socket_t fd, int what, void *ud, void *sockp)
{
    shard *sh = ud;
    (void)e;
    (void)sockp;
    unsigned w = what == CURL_POLL_REMOVE ? 0
               : (what & CURL_POLL_IN ? CAL_LOOP_IN : 0) | (what & CURL_POLL_OUT ? CAL_LOOP_OUT : 0);
    /* a failed change leaves the transfer to its timeouts: curl cannot be
     * told here, and the request still ends with a status */
    cal_loop_set(sh->r->loop, (int)fd, w, (uint32_t)sh->idx);
    return 0;
}

static int on_timer(CURLM *m, long timeout_ms, void *ud)
{
    shard *sh = ud;
    run *r = sh->r;
    (void)m;
    int64_t at = timeout_ms < 0 ? -1 : cal_now_ns() + (int64_t)timeout_ms * 1000000;
    sh->timer_at = at;
    /* an earlier timer keeps the minimum known; any other change may have
     * moved it, so the next look walks the shards */
    if (at >= 0 && !r->timer_stale && (r->timer_min < 0 || at <= r->timer_min)) r->timer_min = at;
    else r->timer_stale = 1;
    return 0;
}

/* The earliest curl timer over r's shards, absolute ns; -1 none. */
static int64_t timer_min(run *r)
{
    if (r->timer_stale) {
        r->timer_min = -1;
        for (int k = 0; k < r->nshards; k++) {
            int64_t at = r->shards[k].timer_at;
            if (at >= 0 && (r->timer_min < 0 || at < r->timer_min)) r->timer_min = at;
        }
        r->timer_stale = 0;
    }
    return r->timer_min;
}

/* Let curl act on sh (a ready socket, or its timer) and note that sh may
 * now hold finished transfers. */
static void shard_action(run *r, shard *sh, curl_socket_t fd, int flags)
{
    int running;
    curl_multi_socket_action(sh->multi, fd, flags, &running);
    if (!sh->touched) {
        sh->touched = 1;
        r->touched[r->ntouched++] = sh->idx;
    }
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
static void connect_ahead(run *r, size_t want)
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
static void slot_put(run *r, slot *s)
{
    assert(s->res == NULL);
    assert(!s->on_free);
    assert(r->nfree < r->nslots);
    s->on_free = 1;
    r->freel[r->nfree++] = s;
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
}

static slot *slot_get(run *r)
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

static void slot_free(slot *s)
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

void cal_req_result_init(cal_req_result *res)
{
    memset(res, 0, sizeof *res);
    res->status = CAL_REQ_CANCELLED;
    res->prompt_tokens = res->output_tokens = -1;
    res->tok_source = CAL_TOKSRC_CHUNKS;
    res->server_prefill_ms = res->server_decode_ms = -1.0;
    res->server_decode_tokens = -1;
    res->cached_tokens = -1;
}

static char *dup_msg(const char *s, size_t n)
{
    char *m = malloc(n + 1);
    if (!m) return NULL;
    memcpy(m, s, n);
    m[n] = '\0';
    return m;
}

/* Decide the one status of a finished transfer (curl result rc). */
static void classify(slot *s, CURLcode rc)
{
    cal_req_result *res = s->res;
    long code = 0;
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
        if (s->in.len) res->error = dup_msg(s->in.data, s->in.len);
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
    if (msg && !res->error) res->error = dup_msg(msg, strlen(msg));
}

/* Fill the token fields and hand the slot back. */
static void finish_slot(run *r, slot *s)
{
    cal_req_result *res = s->res;
    if (s->usage_seen && res->output_tokens >= 0) {
        res->tok_source = CAL_TOKSRC_USAGE;
    } else {
        res->tok_source = CAL_TOKSRC_CHUNKS;
        res->output_tokens = res->n_chunks;
    }
    if (r->p->cfg.keep_text && s->text.len) {
        res->text = dup_msg(s->text.data, s->text.len);
        if (!res->text && res->status == CAL_REQ_OK) {   /* never ok without what was kept */
            static const char m[] = "cancelled: out of memory for the generated text";
            res->status = CAL_REQ_CANCELLED;
            if (!res->error) res->error = dup_msg(m, sizeof m - 1);
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
    /* libcurl counts the retries of a reused connection that died (a server
     * that closes keep-alive connections) over the handle's whole life, not
     * per transfer, and fails the sixth: a long run against llama-server lost
     * a request in about 200 that way. A reset handle counts afresh; the
     * connection cache is the multi handle's, so reuse is kept. */
    curl_easy_reset(s->easy);
    slot_setopts(r, s);
    slot_put(r, s);
    assert(r->nfree + r->in_flight == r->nslots);
}

/* End an in-flight request now with status st (idle timeout, cancel). */
static void end_now(run *r, slot *s, cal_req_status st, const char *msg)
{
    curl_multi_remove_handle(s->sh->multi, s->easy);
    if (flush_slot(s) != CAL_OK && s->fail >= 0) {
        /* a waiting event had already ended it (inline, the transfer would
         * have stopped there) */
        classify(s, CURLE_WRITE_ERROR);
        finish_slot(r, s);
        return;
    }
    cal_sse_finish(s->sse);
    s->res->status = st;
    s->res->end_ns = cal_now_ns();
    if (msg) s->res->error = dup_msg(msg, strlen(msg));
    finish_slot(r, s);
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
static char *body_for(run *r, const cal_request *rq)
{
    if (r->body_last && r->body_max == rq->max_tokens
        && rq->prompt && strcmp(r->body_prompt, rq->prompt) == 0)
        return dup_msg(r->body_last, r->body_len);
    char *body = make_body(r->p, r->tmpl, rq);
    if (!body) return NULL;
    size_t len = strlen(body);
    char *keep = dup_msg(body, len), *prompt = strdup(rq->prompt);
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

static int start_request(run *r, size_t j, const cal_request *rq, cal_req_result *res,
                         int64_t sched_ns, double *lags, size_t *nlags)
{
    /* the body first: a slot is taken only for a request that goes out */
    char *body;
    if (j < r->nbody0 && r->body0[j]) {         /* built before the start */
        body = r->body0[j];
        r->body0[j] = NULL;
    } else {
        body = body_for(r, rq);
    }
    if (!body) return CAL_ENOMEM;
    slot *s = slot_get(r);
    if (!s) { free(body); return CAL_ENOMEM; }
    s->res = res;
    s->body = body;
    s->mode = MODE_UNKNOWN;
    s->done_seen = s->finish_seen = s->usage_seen = 0;
    s->fail = -1;
    s->fail_msg[0] = '\0';
    s->errbuf[0] = '\0';
    s->chunk_cap = 0;
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
        res->error = dup_msg("could not add the transfer", 26);
        res->end_ns = cal_now_ns();
        finish_slot(r, s);
        return 1;                               /* ended at once: caller frees its slot */
    }
    return CAL_OK;
}

static void drain_done(run *r, int64_t *ring, size_t *ring_tail, size_t ring_cap,
                       cal_probe_progress_fn progress, void *ud, size_t n)
{
    /* only the shards curl ran can hold finished transfers */
    for (int t = 0; t < r->ntouched; t++) {
        int k = r->touched[t];
        r->shards[k].touched = 0;
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(r->shards[k].multi, &left))) {
            if (m->msg != CURLMSG_DONE) continue;
            slot *s = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            CURLcode rc = m->data.result;
            curl_multi_remove_handle(s->sh->multi, s->easy);   /* m is invalid now */
            if (flush_slot(s) != CAL_OK && rc == CURLE_OK) rc = CURLE_WRITE_ERROR;
            classify(s, rc);
            int64_t end = s->res->end_ns;
            finish_slot(r, s);
            if (ring) ring[(*ring_tail)++ % ring_cap] = end;
            if (progress) progress(ud, r->done, n);
        }
    }
    r->ntouched = 0;
}

/* The loop found nothing to read: interpret waiting events, the oldest
 * requests' first, about `budget` events' worth, then let the loop look for
 * bytes again (so a socket that turns ready meanwhile waits for a few
 * events' work, not for all of them). A request that one of them ends (an
 * error event, a malformed one) ends now, as it would have on arrival with
 * inline interpretation, with its end_ns the stamp of that event's bytes. */
static void flush_idle(run *r, int budget, int64_t *ring, size_t *ring_tail, size_t ring_cap,
                       cal_probe_progress_fn progress, void *ud, size_t n)
{
    size_t nd = 0;
    while (nd < r->ndirty && budget > 0) budget -= r->dirty[nd++]->npev;
    for (size_t i = 0; i < nd; i++) {
        slot *s = r->dirty[i];
        s->queued = 0;
        if (!s->res || !s->npev) continue;
        if (flush_slot(s) == CAL_OK || s->fail < 0) continue;
        curl_multi_remove_handle(s->sh->multi, s->easy);
        classify(s, CURLE_WRITE_ERROR);
        int64_t end = s->res->end_ns;
        finish_slot(r, s);
        if (ring) ring[(*ring_tail)++ % ring_cap] = end;
        if (progress) progress(ud, r->done, n);
    }
    memmove(r->dirty, r->dirty + nd, (r->ndirty - nd) * sizeof *r->dirty);
    r->ndirty -= nd;
}

/* splitmix64: a small seeded generator for Poisson arrivals */
static uint64_t next_u64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void raise_nofile(size_t need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need) return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
}

/* Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
 * U+10FFFF), what jansson accepts in json_string. Checked here without an
 * allocation, so that running out of memory is never reported as a bad
 * prompt. */
static int utf8_valid(const char *str)
{
    const unsigned char *u = (const unsigned char *)str;
    while (*u) {
        unsigned c = *u;
        int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2
              : (c & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0) return 0;
        uint32_t cp = n == 0 ? c : n == 1 ? c & 0x1F : n == 2 ? c & 0x0F : c & 0x07;
        for (int k = 1; k <= n; k++) {
            if ((u[k] & 0xC0) != 0x80) return 0;   /* also stops at the NUL */
            cp = cp << 6 | (u[k] & 0x3F);
        }
        static const uint32_t least[4] = { 0, 0x80, 0x800, 0x10000 };
        if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        u += n + 1;
    }
    return 1;
}

/* One event loop's share of a run: its requests (in index order), their
 * results, its load, and what it measured. A loop touches nothing another
 * loop touches: the per-chunk path takes no lock. */
typedef struct job {
    cal_probe *p;
    const cal_request *reqs;     /* [n] */
    cal_req_result *results;     /* [n], initialised */
    size_t   n;
    cal_load load;               /* this loop's concurrency (and rate) */
    const size_t *idx;           /* [n]: the caller's index of each request; NULL: the same */
    volatile int *stop;          /* the caller's flag (one loop, the caller's thread) */
    atomic_int *astop;           /* the coordinator's copy of it (several loops) */
    cal_probe_progress_fn progress;
    void    *ud;
    cal_probe_stats st;          /* this loop's chunks, bytes, CPU, wall */
    double  *lags;               /* [nlags] send − sched, ms (owned) */
    size_t   nlags;
    int      rc;
    _Atomic size_t done;         /* requests ended, for the coordinator */
    struct coord *co;            /* NULL when the loop runs on the caller's thread */
    int64_t  t0;                 /* the run's start: closed-loop slots free then */
    int64_t  sched_base;         /* added to a non-zero sched_ns (load.from_start) */
    size_t   ahead;              /* connections to open before the start */
    int      prepared;           /* loop_prepare ran (r, ring, lags are set) */
    run      r;                  /* the loop's state, from loop_prepare on */
    int64_t *ring;               /* closed loop: when each slot freed [cap] */
} job;

/* Most slots and first-wave bodies made before the start (an open loop
 * without a cap has as many "slots" as requests). */
#define PREP_MAX 16384

/* Everything a loop needs before its first send: curl's multi handles, the
 * first wave's slots (curl easy handles set up) and bodies, and the
 * connections opened ahead. On the caller's thread, before the run's clock
 * starts. Failure: j->rc. */
static void loop_prepare(job *j)
{
    cal_probe *p = j->p;
    size_t n = j->n;
    const cal_load *load = &j->load;
    int open_loop = load->rate > 0;
    size_t cap = load->concurrency > 0 ? (size_t)load->concurrency : n;
    if (cap > n) cap = n;
    run *r = &j->r;
    memset(r, 0, sizeof *r);
    j->prepared = 1;
    r->p = p;
    r->load = load;
    r->res0 = j->results;
    r->idx = j->idx;
    r->cap = cap;
    r->st = &j->st;
    r->ahead_given = -1;
    int rc = cal_loop_open(p->loop_ops, &r->loop);
    r->tmpl = json_deep_copy(p->tmpl);          /* jansson values are not shared across threads */
    r->nshards = (int)((cap + SHARD_TRANSFERS - 1) / SHARD_TRANSFERS);
    if (r->nshards > 64) r->nshards = 64;
    r->shards = calloc((size_t)r->nshards, sizeof *r->shards);
    r->touched = calloc((size_t)r->nshards, sizeof *r->touched);
    r->timer_min = -1;
    j->lags = malloc(n * sizeof *j->lags);
    j->ring = open_loop ? NULL : malloc(cap * sizeof *j->ring);
    if (rc == CAL_OK && (!r->tmpl || !r->shards || !r->touched || !j->lags || (!open_loop && !j->ring)))
        rc = CAL_ENOMEM;
    long per_shard = rc ? 0 : (long)((cap + (size_t)r->nshards - 1) / (size_t)r->nshards);
    for (int k = 0; rc == CAL_OK && k < r->nshards; k++) {
        shard *sh = &r->shards[k];
        sh->r = r;
        sh->idx = k;
        sh->timer_at = -1;
        sh->multi = curl_multi_init();
        if (!sh->multi) { rc = CAL_ENOMEM; break; }
        curl_multi_setopt(sh->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
        curl_multi_setopt(sh->multi, CURLMOPT_SOCKETDATA, sh);
        curl_multi_setopt(sh->multi, CURLMOPT_TIMERFUNCTION, on_timer);
        curl_multi_setopt(sh->multi, CURLMOPT_TIMERDATA, sh);
        curl_multi_setopt(sh->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, per_shard);
        curl_multi_setopt(sh->multi, CURLMOPT_MAXCONNECTS, per_shard);
    }
    /* the first wave's slots and bodies: built in the timed loop, they
     * delay its sends (a unique prompt's body is a jansson dump each) */
    size_t wave = cap < PREP_MAX ? cap : PREP_MAX;
    if (rc == CAL_OK && wave) {
        r->body0 = calloc(wave, sizeof *r->body0);
        if (!r->body0) rc = CAL_ENOMEM;
        else r->nbody0 = wave;
    }
    for (size_t i = 0; rc == CAL_OK && i < wave; i++)
        if (!(r->body0[i] = body_for(r, &j->reqs[i]))) rc = CAL_ENOMEM;
    for (size_t i = 0; rc == CAL_OK && i < wave; i++)
        if (!slot_get(r)) rc = CAL_ENOMEM;
    for (size_t i = r->nslots; i > 0; i--) slot_put(r, r->slots[i - 1]);   /* slot 0 on top */
    if (rc == CAL_OK) connect_ahead(r, j->ahead < wave ? j->ahead : wave);
    j->rc = rc;
}

/* Drive j's requests to their ends on the calling thread (preparing them
 * first unless loop_prepare already did). */
static int loop_run(job *j)
{
    if (!j->prepared) loop_prepare(j);
    cal_probe *p = j->p;
    const cal_request *reqs = j->reqs;
    cal_req_result *results = j->results;
    size_t n = j->n;
    const cal_load *load = &j->load;
    volatile int *stop = j->stop;
    cal_probe_progress_fn progress = j->progress;
    void *ud = j->ud;
    cal_probe_stats *st = &j->st;
    int open_loop = load->rate > 0;
    size_t cap = load->concurrency > 0 ? (size_t)load->concurrency : n;
    if (cap > n) cap = n;
    int64_t t_wall0 = cal_now_ns(), t_cpu0 = cal_thread_cpu_ns();
    size_t nlags = 0, next = 0, ring_head = 0, ring_tail = 0;   /* next: the first unsent */
    run *r = &j->r;
    double *lags = j->lags;
    int64_t *ring = j->ring;
    int rc = j->rc;
    if (rc) goto out;

    int64_t t0 = j->t0;                         /* the run's start, one for all loops */
    if (ring) for (size_t i = 0; i < cap; i++) ring[ring_tail++ % cap] = t0;
    uint64_t seed = load->seed;
    int64_t arrival = t0;                       /* open loop: next arrival */
    int64_t next_sched = 0;                     /* sched of reqs[next] */
    int have_sched = 0;
    const int64_t idle_ns = p->cfg.idle_timeout_ns;
    /* The timeout check runs when the earliest in-flight request could
     * expire: its last byte + idle_ns, or its deadline (last bytes only move
     * forward; start_request pulls next_scan in to a new request's deadline),
     * so a slow stream costs no extra wakeups; 1 ms at the finest. */
    r->next_scan = sat_add(t0, idle_ns);
    cal_loop_event evs[256];
    int stopped = 0;

    while (r->done < n) {
        int64_t now = cal_now_ns();
        int halt = (stop && *stop) || (j->astop && atomic_load_explicit(j->astop, memory_order_relaxed));
        if (halt || (load->deadline_ns && now >= load->deadline_ns)) {
            stopped = halt ? 1 : 2;
            break;
        }
        /* release every request that is due and has a slot */
        while (next < n) {
            if (!have_sched) {
                if (open_loop) {
                    double u = (double)(next_u64(&seed) >> 11) * 0x1.0p-53;
                    arrival += cal_span_ns(-log1p(-u) / load->rate);
                    next_sched = reqs[next].sched_ns ? reqs[next].sched_ns + j->sched_base : arrival;
                } else if (r->in_flight < cap) {
                    /* closed loop: due when a slot was freed (its last byte) */
                    int64_t freed = ring[ring_head++ % cap];
                    int64_t want = reqs[next].sched_ns ? reqs[next].sched_ns + j->sched_base : 0;
                    next_sched = want > freed ? want : freed;
                } else {
                    break;
                }
                have_sched = 1;
            }
            if (next_sched > now || r->in_flight >= cap) break;
            have_sched = 0;
            rc = start_request(r, next, &reqs[next], &results[next], next_sched, lags, &nlags);
            if (rc == 1) {                      /* failed to start: its slot frees now */
                rc = CAL_OK;
                if (ring) ring[ring_tail++ % cap] = results[next].end_ns;
                if (progress) progress(ud, r->done, n);
            }
            if (rc) goto out;
            next++;
        }
        if (r->done >= n) break;

        int64_t wait = MAX_WAIT_NS;
        int64_t tmin = timer_min(r);
        if (tmin >= 0 && tmin - now < wait) wait = tmin - now;
        if (next < n && r->in_flight < cap && have_sched && next_sched - now < wait)
            wait = next_sched - now;
        if (r->next_scan - now < wait) wait = r->next_scan - now;
        if (load->deadline_ns && load->deadline_ns - now < wait) wait = load->deadline_ns - now;
        if (wait < 0) wait = 0;
        const int maxev = (int)(sizeof evs / sizeof evs[0]);
        int nev = -1;
        if (r->ndirty) {                         /* events wait: anything to read first? */
            nev = cal_loop_wait(r->loop, evs, maxev, 0);
            if (nev == 0) {                     /* idle: interpret some, look again */
                flush_idle(r, FLUSH_BUDGET, ring, &ring_tail, cap, progress, ud, n);
                continue;
            }
        }
        if (nev < 0) nev = cal_loop_wait(r->loop, evs, maxev, wait);
        r->defer = nev >= DEFER_MIN_READY;
        for (int i = 0; i < nev; i++) {
            int flags = 0;
            if (evs[i].what & CAL_LOOP_IN) flags |= CURL_CSELECT_IN;
            if (evs[i].what & CAL_LOOP_OUT) flags |= CURL_CSELECT_OUT;
            if (evs[i].what & CAL_LOOP_ERR) flags |= CURL_CSELECT_ERR;
            if (evs[i].tag >= (uint32_t)r->nshards) continue;
            shard_action(r, &r->shards[evs[i].tag], (curl_socket_t)evs[i].fd, flags);
        }
        r->defer = 0;
        now = cal_now_ns();
        int64_t due = timer_min(r);
        for (int k = 0; due >= 0 && now >= due && k < r->nshards; k++) {
            shard *sh = &r->shards[k];
            if (sh->timer_at >= 0 && now >= sh->timer_at) {
                sh->timer_at = -1;             /* curl may set a new one inside */
                r->timer_stale = 1;
                shard_action(r, sh, CURL_SOCKET_TIMEOUT, 0);
            }
        }
        drain_done(r, ring, &ring_tail, cap, progress, ud, n);
        now = cal_now_ns();
        if (now >= r->next_scan) {               /* no bytes for idle_ns, or past the deadline */
            r->next_scan = sat_add(now, idle_ns);
            for (size_t i = 0; i < r->nslots; i++) {
                slot *s = r->slots[i];
                if (!s->res) continue;
                int64_t idle_at = sat_add(s->last_byte_ns, idle_ns);
                int64_t at = idle_at < s->deadline_ns ? idle_at : s->deadline_ns;
                if (now < at) {
                    if (at < r->next_scan) r->next_scan = at;
                    continue;
                }
                char m[128];
                if (idle_at <= s->deadline_ns)
                    snprintf(m, sizeof m, "no bytes for %.0f ms (idle timeout)",
                             (double)(now - s->last_byte_ns) / 1e6);
                else
                    snprintf(m, sizeof m, "not done %.0f ms after it was sent (request timeout "
                             "%.0f ms)", (double)(now - s->res->send_ns) / 1e6,
                             (double)(s->deadline_ns - s->res->send_ns) / 1e6);
                int64_t end = now;
                end_now(r, s, CAL_REQ_TIMEOUT, m);
                if (ring) ring[ring_tail++ % cap] = end;
                if (progress) progress(ud, r->done, n);
            }
            if (r->next_scan < now + 1000000) r->next_scan = now + 1000000;
        }
    }
    if (stopped) {                              /* cancel in flight, then unsent */
        const char *why = stopped == 1 ? "cancelled: the run was stopped"
                                       : "cancelled: the load deadline passed";
        for (size_t i = 0; i < r->nslots; i++) {
            slot *s = r->slots[i];
            if (s->res) end_now(r, s, CAL_REQ_CANCELLED, why);
        }
        for (; next < n; next++) {
            results[next].status = CAL_REQ_CANCELLED;
            results[next].error = dup_msg(why, strlen(why));
            r->done++;
        }
        if (progress) progress(ud, r->done, n);
        if (stopped == 1) rc = CAL_ECANCEL;
    }
out:
    st->wall_ns = cal_now_ns() - t_wall0;
    st->cpu_ns = cal_thread_cpu_ns() - t_cpu0;
    j->nlags = nlags;
    if (rc && rc != CAL_ECANCEL) {               /* internal failure: end all */
        static const char why[] = "cancelled: probe failure";
        for (size_t i = 0; i < r->nslots; i++)
            if (r->slots[i]->res) end_now(r, r->slots[i], CAL_REQ_CANCELLED, why);
        for (; next < n; next++)
            if (!results[next].error) results[next].error = dup_msg(why, sizeof why - 1);
    }
    st->wait_fallback = r->loop && r->loop->fallback;
    for (size_t i = 0; i < r->nslots; i++) {
        curl_multi_remove_handle(r->slots[i]->sh->multi, r->slots[i]->easy);
        slot_free(r->slots[i]);
    }
    free(r->slots);
    free(r->freel);
    free(r->dirty);
    for (int k = 0; r->shards && k < r->nshards; k++)
        if (r->shards[k].multi) curl_multi_cleanup(r->shards[k].multi);
    free(r->shards);
    free(r->touched);
    cal_loop_close(&r->loop);
    json_decref(r->tmpl);
    free(r->body_last);
    free(r->body_prompt);
    for (size_t i = 0; i < r->nbody0; i++) free(r->body0[i]);
    free(r->body0);
    while (r->nahead) close(r->ahead[--r->nahead]);   /* opened ahead, never used */
    free(r->ahead);
    free(ring);
    j->rc = rc;
    return rc;
}

/* ---- loops: shares, threads, the merge ---------------------------------- */

/* The caller's thread coordinates: it shows progress, and reads the
 * caller's stop flag (which its progress callback or a signal handler may
 * set) into an atomic the loops read. A loop takes the lock once a request,
 * to wake it; never per chunk. */
typedef struct coord {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int             running;     /* loops not yet returned */
    atomic_int      stop;        /* *stop, as last seen */
} coord;

static void job_progress(void *ud, size_t done, size_t total)
{
    job *j = ud;
    (void)total;
    atomic_store_explicit(&j->done, done, memory_order_relaxed);
    pthread_mutex_lock(&j->co->mu);
    pthread_cond_signal(&j->co->cv);
    pthread_mutex_unlock(&j->co->mu);
}

static void *job_thread(void *arg)
{
    job *j = arg;
    loop_run(j);
    pthread_mutex_lock(&j->co->mu);
    j->co->running--;
    pthread_cond_signal(&j->co->cv);
    pthread_mutex_unlock(&j->co->mu);
    return NULL;
}

/* A loop whose thread was on a CPU at least this share of its wall time
 * could not keep up with its streams. (A late send with an idle loop is the
 * machine's doing, not the loop's: the send-lag verdict speaks of that.) */
#define SATURATED_BUSY   0.9

/* What each loop did, and the run's figures over all of them. */
static void merge_stats(job *jobs, int nl, int64_t wall_ns, cal_probe_stats *st)
{
    size_t nlags = 0;
    for (int k = 0; k < nl; k++) nlags += jobs[k].nlags;
    double *all = nlags ? malloc(nlags * sizeof *all) : NULL;
    size_t at = 0;
    double worst = -1;
    st->n_loops = nl;
    st->saturated_loop = -1;
    for (int k = 0; k < nl; k++) {
        job *j = &jobs[k];
        st->cpu_ns += j->st.cpu_ns;
        st->chunks += j->st.chunks;
        st->bytes += j->st.bytes;
        st->implausible += j->st.implausible;
        st->max_in_flight += j->st.max_in_flight;
        st->wait_fallback |= j->st.wait_fallback;
        st->connected_ahead += j->st.connected_ahead;
        st->used_ahead += j->st.used_ahead;
        cal_probe_loop_stats *ls = &st->loop[k];
        ls->requests = (int64_t)j->n;
        ls->chunks = j->st.chunks;
        ls->cpu_ns = j->st.cpu_ns;
        ls->wall_ns = j->st.wall_ns;
        ls->send_lag_p99_ms = 0;
        if (j->nlags) {
            cal_stats_sort(j->lags, j->nlags);
            ls->send_lag_p99_ms = cal_stats_percentile_sorted(j->lags, j->nlags, 99);
            if (all) memcpy(all + at, j->lags, j->nlags * sizeof *all);
            at += j->nlags;
        }
        double busy = ls->wall_ns > 0 ? (double)ls->cpu_ns / (double)ls->wall_ns : 0;
        if (busy >= SATURATED_BUSY && busy > worst) {
            worst = busy;
            st->saturated_loop = k;
        }
    }
    st->wall_ns = wall_ns;
    if (all && at) {
        cal_stats_sort(all, at);
        st->send_lag_p50_ms = cal_stats_percentile_sorted(all, at, 50);
        st->send_lag_p99_ms = cal_stats_percentile_sorted(all, at, 99);
        st->send_lag_max_ms = all[at - 1];
    } else if (at) {                             /* no room for the merge: the worst loop's */
        for (int k = 0; k < nl; k++) {
            job *j = &jobs[k];
            if (!j->nlags) continue;
            double p50 = cal_stats_percentile_sorted(j->lags, j->nlags, 50);
            if (p50 > st->send_lag_p50_ms) st->send_lag_p50_ms = p50;
            if (st->loop[k].send_lag_p99_ms > st->send_lag_p99_ms)
                st->send_lag_p99_ms = st->loop[k].send_lag_p99_ms;
            if (j->lags[j->nlags - 1] > st->send_lag_max_ms) st->send_lag_max_ms = j->lags[j->nlags - 1];
        }
    }
    free(all);
}

/* Which loop a request goes to. Closed loop: the requests cycle over the
 * concurrency's slots, slot s belonging to loop s % nl, so each loop's share
 * of the requests matches its share of the slots. Open loop: in turn. */
static int loop_of(size_t i, size_t cap, int nl, int open_loop)
{
    size_t s = open_loop || cap == 0 ? i : i % cap;
    return (int)(s % (size_t)nl);
}

int cal_probe_run(cal_probe *p, const cal_request *reqs, size_t n,
                  const cal_load *load, cal_req_result *results,
                  volatile int *stop, cal_probe_progress_fn progress, void *ud,
                  cal_probe_stats *stats)
{
    if (!p || !load || (n && (!reqs || !results))) return CAL_EINVAL;
    cal_probe_stats st_local;
    cal_probe_stats *st = stats ? stats : &st_local;
    memset(st, 0, sizeof *st);
    st->first_fail = -1;
    st->saturated_loop = -1;
    st->first_lag_p50_ms = st->first_lag_p99_ms = NAN;
    snprintf(st->loop_backend, sizeof st->loop_backend, "%s", p->loop_ops->name);
    for (size_t i = 0; i < n; i++) cal_req_result_init(&results[i]);
    int open_loop = load->rate > 0;
    if (!isfinite(load->rate) || load->rate < 0 || load->concurrency < 0
        || (!open_loop && load->concurrency == 0)) return CAL_EINVAL;
    for (size_t i = 0; i < n; i++)             /* fail before anything is sent */
        if (!reqs[i].prompt || !utf8_valid(reqs[i].prompt)) return CAL_EINVAL;
    if (n == 0) return CAL_OK;

    size_t cap = load->concurrency > 0 ? (size_t)load->concurrency : n;
    if (cap > n) cap = n;
    if (p->cfg.raise_nofile) raise_nofile(cap + 256);
    /* connections opened ahead: a closed loop's slots; an open loop's cap
     * only when its times count from the start (absolute ones would find the
     * opening eating into them) */
    int ahead = !p->cfg.no_connect_ahead && (!open_loop || (load->concurrency > 0 && load->from_start));
    int64_t prep0 = cal_now_ns(), t0;
    /* loops: as asked, never more than the requests in flight at once */
    int nl = p->cfg.loops > 1 ? p->cfg.loops : 1;
    if ((size_t)nl > cap) nl = (int)cap;

    int rc = CAL_OK;
    job *jobs = calloc((size_t)nl, sizeof *jobs);
    if (!jobs) return CAL_ENOMEM;
    if (nl == 1) {                              /* on the caller's thread, no copies */
        jobs[0] = (job){ .p = p, .reqs = reqs, .results = results, .n = n, .load = *load,
                         .stop = stop, .progress = progress, .ud = ud, .ahead = ahead ? cap : 0 };
        loop_prepare(&jobs[0]);
        t0 = cal_now_ns();                      /* the run's clock starts */
        jobs[0].t0 = t0;
        if (load->from_start) {
            jobs[0].sched_base = t0;
            if (load->deadline_ns) jobs[0].load.deadline_ns = sat_add(load->deadline_ns, t0);
        }
        loop_run(&jobs[0]);
        rc = jobs[0].rc;
    } else {
        /* each loop's requests and results, and where they came from */
        size_t *cnt = calloc((size_t)nl, sizeof *cnt);
        size_t *idx = malloc(n * sizeof *idx);      /* loop k's j-th request: idx[off_k + j] */
        size_t *off = calloc((size_t)nl + 1, sizeof *off);
        cal_request *rq = malloc(n * sizeof *rq);
        cal_req_result *rs = malloc(n * sizeof *rs);
        if (!cnt || !idx || !off || !rq || !rs) {
            free(cnt); free(idx); free(off); free(rq); free(rs); free(jobs);
            return CAL_ENOMEM;
        }
        for (size_t i = 0; i < n; i++) cnt[loop_of(i, cap, nl, open_loop)]++;
        for (int k = 0; k < nl; k++) off[k + 1] = off[k] + cnt[k];
        memset(cnt, 0, (size_t)nl * sizeof *cnt);
        for (size_t i = 0; i < n; i++) {
            int k = loop_of(i, cap, nl, open_loop);
            size_t at = off[k] + cnt[k]++;
            idx[at] = i;
            rq[at] = reqs[i];
            cal_req_result_init(&rs[at]);
        }
        coord co = { .running = 0 };
        atomic_init(&co.stop, stop && *stop);
        pthread_mutex_init(&co.mu, NULL);
        pthread_cond_init(&co.cv, NULL);
        pthread_t *th = calloc((size_t)nl, sizeof *th);
        int *started = calloc((size_t)nl, sizeof *started);
        for (int k = 0; k < nl; k++) {
            size_t share = cap / (size_t)nl + ((size_t)k < cap % (size_t)nl);
            cal_load lk = *load;
            lk.concurrency = load->concurrency > 0 || !open_loop ? (int)share : 0;
            lk.from_start = 0;                  /* made absolute below */
            jobs[k] = (job){ .p = p, .reqs = rq + off[k], .results = rs + off[k],
                             .n = off[k + 1] - off[k], .load = lk, .idx = idx + off[k], .astop = &co.stop,
                             .progress = job_progress, .co = &co, .ahead = ahead ? share : 0 };
            jobs[k].ud = &jobs[k];
            atomic_init(&jobs[k].done, 0);
            if (jobs[k].n) loop_prepare(&jobs[k]);
        }
        t0 = cal_now_ns();                      /* the run's clock starts */
        memset(cnt, 0, (size_t)nl * sizeof *cnt);
        uint64_t seed = load->seed;
        int64_t arrival = t0;
        for (size_t i = 0; i < n; i++) {
            int k = loop_of(i, cap, nl, open_loop);
            size_t at = off[k] + cnt[k]++;
            if (load->from_start && rq[at].sched_ns) rq[at].sched_ns = sat_add(rq[at].sched_ns, t0);
            if (open_loop) {       /* one Poisson stream over the run, as one loop draws it */
                double u = (double)(next_u64(&seed) >> 11) * 0x1.0p-53;
                arrival += cal_span_ns(-log1p(-u) / load->rate);
                if (!rq[at].sched_ns) rq[at].sched_ns = arrival;
            }
        }
        for (int k = 0; k < nl; k++) {
            jobs[k].t0 = t0;
            if (load->from_start && load->deadline_ns)
                jobs[k].load.deadline_ns = sat_add(load->deadline_ns, t0);
        }
        pthread_mutex_lock(&co.mu);
        for (int k = 0; th && started && k < nl; k++) {
            if (jobs[k].n == 0) continue;
            if (pthread_create(&th[k], NULL, job_thread, &jobs[k]) == 0) {
                started[k] = 1;
                co.running++;
            }
        }
        pthread_mutex_unlock(&co.mu);
        /* a loop no thread could be had for runs here, beside the others,
         * reading the caller's flag itself */
        for (int k = 0; k < nl; k++)
            if (jobs[k].n && !(started && started[k])) {
                jobs[k].stop = stop;
                loop_run(&jobs[k]);
            }
        size_t shown = (size_t)-1;
        pthread_mutex_lock(&co.mu);
        for (;;) {
            size_t done = 0;
            for (int k = 0; k < nl; k++)
                done += started && started[k] ? atomic_load_explicit(&jobs[k].done, memory_order_relaxed)
                                              : jobs[k].n;
            if (progress && done != shown) {    /* the caller's callback, on the caller's thread */
                shown = done;
                pthread_mutex_unlock(&co.mu);
                progress(ud, done, n);
                pthread_mutex_lock(&co.mu);
            }
            if (stop && *stop) atomic_store_explicit(&co.stop, 1, memory_order_relaxed);
            if (co.running == 0) break;
            struct timespec ts;                 /* *stop is read at least every 50 ms */
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 50000000;
            if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
            pthread_cond_timedwait(&co.cv, &co.mu, &ts);
        }
        pthread_mutex_unlock(&co.mu);
        for (int k = 0; k < nl; k++) if (started && started[k]) pthread_join(th[k], NULL);
        pthread_mutex_destroy(&co.mu);
        pthread_cond_destroy(&co.cv);
        for (int k = 0; k < nl; k++)            /* the worst: a failure, then a cancel */
            if (jobs[k].rc && (rc == CAL_OK || rc == CAL_ECANCEL)) rc = jobs[k].rc;
        /* results back in request order: ownership moves with the struct */
        for (size_t a = 0; a < n; a++) results[idx[a]] = rs[a];
        if (progress && shown != n) progress(ud, n, n);
        free(th); free(started); free(cnt); free(idx); free(off); free(rq); free(rs);
    }
    merge_stats(jobs, nl, cal_now_ns() - t0, st);
    st->start_ns = t0;
    st->prepare_ns = t0 - prep0;
    for (int k = 0; k < nl; k++) free(jobs[k].lags);
    free(jobs);
    /* the first wave: one request per slot, all due at the start in a
     * closed loop; a late one here is the client's opening, not the server */
    st->first_wave = open_loop && load->concurrency <= 0 ? 0 : (int)(cap < INT_MAX ? cap : INT_MAX);
    st->first_lag_p50_ms = st->first_lag_p99_ms = NAN;
    double *fl = st->first_wave ? malloc((size_t)st->first_wave * sizeof *fl) : NULL;
    size_t nfl = 0;
    for (size_t i = 0; fl && i < (size_t)st->first_wave; i++)
        if (results[i].send_ns && results[i].sched_ns)
            fl[nfl++] = (double)(results[i].send_ns - results[i].sched_ns) / 1e6;
    if (nfl) {
        cal_stats_sort(fl, nfl);
        st->first_lag_p50_ms = cal_stats_percentile_sorted(fl, nfl, 50);
        st->first_lag_p99_ms = cal_stats_percentile_sorted(fl, nfl, 99);
    }
    free(fl);
    /* what ended how, and the first failure's words, for the caller to say */
    st->first_fail = -1;
    for (size_t i = 0; i < n; i++) {
        cal_req_status rs = results[i].status;
        st->n_status[(unsigned)rs < CAL_REQ_N_STATUS ? rs : CAL_REQ_CANCELLED]++;
        if (st->first_fail < 0 && rs != CAL_REQ_OK && rs != CAL_REQ_CANCELLED) {
            st->first_fail = i > INT_MAX ? INT_MAX : (int)i;
            snprintf(st->first_fail_msg, sizeof st->first_fail_msg, "%s",
                     results[i].error ? results[i].error : "");
            for (char *c = st->first_fail_msg; *c; c++)   /* one line: bodies hold newlines */
                if ((unsigned char)*c < 32 || *c == 127) *c = ' ';
        }
    }
    return rc;
}

int cal_probe_loops_summary(const cal_probe_stats *st, char *buf, size_t size)
{
    if (buf && size) buf[0] = '\0';
    if (!st || !buf || !size) return st ? st->saturated_loop : -1;
    size_t o = 0;
    int w = snprintf(buf, size, "%d loop%s (%s)", st->n_loops, st->n_loops == 1 ? "" : "s",
                     st->loop_backend[0] ? st->loop_backend : "?");
    o = w > 0 ? (size_t)w : 0;
    for (int k = 0; k < st->n_loops && k < CAL_PROBE_MAX_LOOPS && o < size; k++) {
        const cal_probe_loop_stats *l = &st->loop[k];
        double busy = l->wall_ns > 0 ? 100.0 * (double)l->cpu_ns / (double)l->wall_ns : 0;
        w = cal_snprintf(buf + o, size - o, "%s loop %d: %lld requests, CPU %.0f %%, send lag p99 %.2f ms",
                     k ? ";" : ":", k, (long long)l->requests, busy, l->send_lag_p99_ms);
        o += w > 0 ? (size_t)w : 0;
    }
    if (st->saturated_loop >= 0 && o < size)
        snprintf(buf + o, size - o, "; loop %d saturated", st->saturated_loop);
    return st->saturated_loop;
}
