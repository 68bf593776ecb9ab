/* caliper — a recording proxy between a chat client and an engine (SPEC 1.3:
 * what the client adds). Requests pass through unchanged and streamed
 * replies go back chunk by chunk; for each /v1/chat/completions and
 * /v1/completions turn it records the prefix composition (system prompt,
 * tool definitions, history, the new message) and the turn's timing: TTFT,
 * decode time, output tokens, the client-visible decode speed.
 *
 * Ownership: cal_proxy_open() starts the server (its own threads) and
 * cal_proxy_close(&p) stops it, waits for open turns and NULLs the pointer.
 * cal_proxy_prefix_parse() fills a cal_prefix whose texts it allocates;
 * cal_prefix_free() releases them. Library code: nothing prints. */
#ifndef CALIPER_PROXY_H
#define CALIPER_PROXY_H
#include "caliper/utf8.h"   /* cal_utf8_chars */
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

/* One part of the prefix a turn sends. */
typedef struct cal_prefix_part {
    long chars;        /* Unicode code points of the part's text */
    long tokens;       /* by the upstream's /tokenize, or estimated */
    int  estimated;    /* 1: tokens = ceil(chars ÷ 4), not counted */
} cal_prefix_part;

enum { CAL_PART_SYSTEM, CAL_PART_TOOLS, CAL_PART_HISTORY, CAL_PART_NEW, CAL_PART_N };
extern const char *const cal_prefix_part_names[CAL_PART_N];  /* "system", "tools", ... */

/* The composition of one request body. */
typedef struct cal_prefix {
    int             chat;          /* 1: messages (chat), 0: prompt (completions) */
    int             stream;        /* the request asked for SSE */
    size_t          n_messages;    /* chat: messages sent */
    size_t          n_tools;       /* entries in the tools array */
    char            new_role[16];  /* role of the last message ("user"; "" for completions) */
    cal_prefix_part part[CAL_PART_N];
    char           *text[CAL_PART_N];  /* the part's text (owned; "" when empty):
                                          system: the system/developer messages' contents
                                          joined by "\n"; tools: the tools array as compact
                                          JSON; history: every other message before the
                                          last (content, and tool_calls as compact JSON);
                                          new: the last message, or the prompt */
} cal_prefix;

/* Parse a chat or completions request body. Token counts start estimated.
 * CAL_OK; CAL_EPROTO when the body is not a JSON object with "messages"
 * (an array) or "prompt" (a string or an array of strings) — why says which;
 * CAL_ENOMEM. On failure out holds no allocation. */
int  cal_prefix_parse(const char *body, size_t len, cal_prefix *out, char *why, size_t why_len);
void cal_prefix_free(cal_prefix *p);

/* One recorded turn. Times are seconds from the moment the proxy had the
 * whole request (and forwarded it); NAN where not applicable. */
typedef struct cal_proxy_turn {
    long       index;            /* 1, 2, ... in arrival order of completion */
    char       path[128];        /* "/v1/chat/completions" */
    int        status;           /* the upstream's HTTP status; 0: no answer */
    char       error[160];       /* "" or why the turn failed */
    cal_prefix prefix;           /* texts freed: only counts are valid here */
    long       prefix_tokens;    /* Σ parts */
    int        prefix_estimated; /* 1 when any part is estimated */
    double     ttft_s;           /* first generated text (streaming); NAN otherwise */
    double     decode_s;         /* first to last generated text; NAN when it all came
                                    in one read (text_reads < 2): no time to measure */
    double     turn_s;           /* until the upstream's last byte */
    long       output_tokens;    /* usage.completion_tokens, else text chunks; -1 unknown */
    int        output_from_usage;/* 1: from usage, 0: counted chunks */
    long       usage_prompt_tokens; /* usage.prompt_tokens; -1 absent */
    long       text_chunks;      /* SSE events that carried generated text */
    long       text_reads;       /* reads from the upstream (one timestamp each)
                                    that carried generated text */
    double     decode_tok_s;     /* SPEC 1.3: (output tokens − 1) ÷ decode s, the run's decode formula (series.h) */
    double     ttft_share;       /* ttft ÷ turn */
    int64_t    wall_ns;          /* CLOCK_REALTIME at the request, for the log */
} cal_proxy_turn;

/* The turn as one JSON object (new reference; NULL on ENOMEM): counts and
 * times with their units in the key names. */
json_t *cal_proxy_turn_json(const cal_proxy_turn *t);

/* ---- the request target ------------------------------------------------ */

#define CAL_PROXY_TARGET_MAX 8192   /* bytes in a request target */

/* Check the request target of a client's request line (the raw bytes, not
 * %-decoded). CAL_OK only for origin form (RFC 9112 3.2.1): a path that
 * starts with '/' but not "//", made of RFC 3986 path characters and
 * well-formed %-escapes (no %00), without "." or ".." segments (also as
 * %2e), then optionally '?' and a query of visible ASCII other than '#'.
 * Anything else — "@host:port/…", "//host/…", absolute form "http://…",
 * '\', CR, LF, spaces, bytes over 0x7e — is CAL_EPROTO, and why says what
 * and at which byte. On CAL_OK *path_len (may be NULL) is the length of the
 * path part. */
int  cal_proxy_target_check(const char *target, size_t *path_len, char *why, size_t why_len);

struct Curl_URL;   /* libcurl's CURLU */
/* The URL a checked target goes to: the upstream's scheme, user, host and
 * port, the upstream's path (trailing '/' dropped) followed by the target's
 * path, the target's query; built with curl's URL API part by part, so the
 * target can never supply an authority. Escapes are kept as the client sent
 * them. *curlu (may be NULL; free with curl_url_cleanup) gets the parsed
 * handle, *url (may be NULL; free()) the text. CAL_OK; CAL_EPROTO when the
 * target fails cal_proxy_target_check; CAL_EINVAL when upstream is not a
 * URL; CAL_ENOMEM. On failure nothing is allocated. */
int  cal_proxy_upstream_url(const char *upstream, const char *target, struct Curl_URL **curlu,
                            char **url, char *why, size_t why_len);

typedef void (*cal_proxy_turn_fn)(void *ud, const cal_proxy_turn *t);

#define CAL_PROXY_MAX_CONN 256   /* default client connection limit */
#define CAL_PROXY_IDLE_S   60     /* default idle timeout, seconds */
#define CAL_PROXY_HEADER_NS (10LL * 1000000000)   /* default request head deadline */
#define CAL_PROXY_BODY_NS   (60LL * 1000000000)   /* default request body deadline */
#define CAL_PROXY_SEND_NS   (30LL * 1000000000)   /* default reply send deadline */

typedef struct cal_proxy_config {
    const char       *host;      /* listen address, IPv4 (NULL: 127.0.0.1) */
    int               port;      /* 0: a free port (see cal_proxy_port) */
    const char       *upstream;  /* "http://127.0.0.1:8000" (no trailing path) */
    int               tokenize;  /* 1: count tokens with POST upstream/tokenize */
    size_t            max_body;  /* request body cap, bytes (0: 32 MiB) */
    unsigned          max_connections; /* client connections at once; more are
                                          closed at accept (0: CAL_PROXY_MAX_CONN) */
    unsigned          idle_timeout_s;  /* a client connection silent this long is
                                          closed (0: CAL_PROXY_IDLE_S); the wait
                                          for the upstream does not count */
    int64_t           header_timeout_ns; /* the request line and headers must be in
                                          this long after connecting, however busy
                                          the client keeps the socket (<= 0:
                                          CAL_PROXY_HEADER_NS); when fewer than
                                          1/64 of max_connections (1 to 64) are
                                          free, the connection that has gone
                                          longest without progress (waiting for
                                          its request, or for its client to read)
                                          is closed */
    int64_t           body_timeout_ns;   /* the body, this long after the headers
                                          (<= 0: CAL_PROXY_BODY_NS) */
    int64_t           send_timeout_ns;   /* a reply whose client takes none of its
                                          bytes this long is reset (<= 0:
                                          CAL_PROXY_SEND_NS); the wait for the
                                          upstream does not count */
    cal_proxy_turn_fn on_turn;   /* called once per turn, one call at a time,
                                    from a proxy thread; may be NULL */
    void             *ud;
} cal_proxy_config;

typedef struct cal_proxy cal_proxy;

/* Start listening. CAL_OK; CAL_EINVAL (bad host or upstream: why says);
 * CAL_EIO when the address cannot be bound; CAL_ENOMEM. */
int  cal_proxy_open(const cal_proxy_config *cfg, cal_proxy **out, char *why, size_t why_len);
/* The bound port. */
int  cal_proxy_port(const cal_proxy *p);
/* Stop accepting, finish open turns, free everything; NULL-safe. */
void cal_proxy_close(cal_proxy **p);

#endif
