/* caliper serve — the OpenAI-compatible HTTP front of the reference engine
 * (GNU libmicrohttpd, epoll, suspend/resume). Endpoints: POST /v1/completions,
 * POST /v1/chat/completions (streaming and not), GET /v1/models, GET /health,
 * GET /metrics (Prometheus), POST /tokenize, GET /profile. docs/serve.md
 * documents the fields, errors and metrics.
 *
 * Ownership: cal_server_open copies what it needs from the config (the model
 * name included); cal_server_close stops everything, ends open streams and
 * NULLs the caller's pointer. The library never prints: failures return a
 * cal_err and a reason in the caller's buffer. */
#ifndef CALIPER_SERVER_SERVER_H
#define CALIPER_SERVER_SERVER_H
#include <stddef.h>
#include <stdint.h>
#include "engine/engine.h"
#include "server/chat_template.h"

typedef struct cal_server_config {
    cal_model_config model;        /* the engine's shape (a preset or flags) */
    const char *model_name;        /* served name ("id" in /v1/models); NULL = model.name */
    const char *preset;            /* preset name reported by /v1/models, or NULL */
    const char *host;              /* bind address; NULL = "127.0.0.1" */
    int         port;              /* 0 = pick a free port */
    int         max_batch;         /* running sequences; 0 = 16 */
    int         max_queue;         /* waiting requests; < 0 = 256 */
    int         prefill_chunk;     /* prompt tokens per engine step; 0 = 256 */
    int64_t     pace_ns;           /* > 0: pacing mode, no model compute */
    size_t      max_body_bytes;    /* request body cap; 0 = 4 MiB */
    int         http_threads;      /* MHD epoll threads; 0 = 1 (2 when pacing) */
    int         max_connections;   /* 0 = 1024 (8192 when pacing) */
    int64_t     header_timeout_ns; /* request line + headers must arrive within this
                                      of accept, however busy the client; 0 = 10 s */
    int64_t     body_timeout_ns;   /* the body within this of the headers; 0 = 60 s */
    int64_t     send_timeout_ns;   /* a reply whose client takes none of its bytes
                                      this long is reset; 0 = 30 s */
    cal_chat_template chat_template; /* how chat messages become the prompt;
                                        zeroed: caliper's own */
    const char *vocab_gguf;        /* a GGUF file whose vocabulary the server
                                      tokenizes with (SentencePiece or BPE);
                                      NULL: model.weights' own when it has one
                                      caliper can encode, else the byte or
                                      synthetic vocabulary */
} cal_server_config;

typedef struct cal_server cal_server;

/* Open the engine (or the pacer), bind, and start serving. CAL_EINVAL for a
 * bad config, CAL_EIO when the address cannot be bound, CAL_ENOMEM; a
 * one-line reason naming the field goes to why[why_cap]. */
int  cal_server_open(const cal_server_config *c, cal_server **out, char *why,
                     size_t why_cap);
/* The bound port (the one picked when port was 0). */
int  cal_server_port(const cal_server *s);
/* Parameters of the served model. */
int64_t cal_server_n_params(const cal_server *s);
/* What the vocabulary's file had wrong and what is used instead
 * (cal_tok_note); "" when nothing was. */
const char *cal_server_vocab_note(const cal_server *s);
/* The engine behind the server, to ask what it holds (cal_engine_weight_bytes,
 * cal_engine_kv_bytes); NULL in pacing mode. Owned by the server; only
 * read-only questions between steps are safe. */
const cal_engine *cal_server_engine(const cal_server *s);
/* The engine's per-op profile JSON, malloc'd (caller frees); NULL in pacing
 * mode or on ENOMEM. Safe while serving (taken between engine steps). */
char *cal_server_profile_json(cal_server *s);
/* Stop accepting, end every stream (finish_reason "abort"), join the
 * threads, free everything. */
void cal_server_close(cal_server **s);

#endif
