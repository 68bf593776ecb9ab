/* caliper serve — the request parser: JSON body → request struct, pure and
 * allocation-bounded, so it can be fuzzed and unit-tested without a socket.
 * Every rejection carries an OpenAI-style error (status, type, param, message)
 * that names the field and the value.
 *
 * Ownership: cal_srv_parse_* fill a caller-owned struct whose heap fields
 * (prompt text, prompt ids) are freed by cal_srv_request_free. */
#ifndef CALIPER_SERVER_REQUEST_H
#define CALIPER_SERVER_REQUEST_H
#include <stddef.h>
#include <stdint.h>

typedef enum cal_srv_api {
    CAL_SRV_COMPLETIONS = 0,   /* POST /v1/completions */
    CAL_SRV_CHAT        = 1    /* POST /v1/chat/completions */
} cal_srv_api;

/* What the parser needs to know about the model to reject a request early. */
struct cal_chat_template;
typedef struct cal_srv_limits {
    int vocab;      /* token ids in a prompt must lie in 0..vocab-1 */
    int max_ctx;    /* positions per sequence: prompt + max_tokens must fit */
    const struct cal_chat_template *tpl;  /* chat: the model's template
                                             (chat_template.h); NULL: caliper's */
} cal_srv_limits;

/* An OpenAI-style error: {"error":{"message","type","param","code"}}. */
typedef struct cal_srv_error {
    int         status;       /* HTTP status: 400, 404, 405, 413, 503, 500 */
    const char *type;         /* "invalid_request_error", ... (static) */
    const char *code;         /* static string or NULL (JSON null) */
    char        param[64];    /* the field at fault; "" = null */
    char        message[320];
} cal_srv_error;

typedef struct cal_srv_request {
    cal_srv_api api;
    char     *prompt;        /* text to tokenize (completions prompt or the
                                rendered chat), NULL when prompt_ids is set */
    size_t    prompt_len;    /* bytes of prompt */
    int32_t  *prompt_ids;    /* [n_prompt_ids] ids given directly, or NULL */
    int       n_prompt_ids;
    int       max_tokens;    /* -1 = not given (the caller picks a default) */
    float     temperature;   /* default 1.0 (as OpenAI); 0 = greedy */
    float     top_p;         /* default 1.0 */
    uint64_t  seed;
    int       has_seed;      /* seed was given */
    int       stream;
    int       include_usage; /* stream_options.include_usage */
    int       ignore_eos;    /* vLLM extension */
    int       min_tokens;    /* vLLM extension: EOS suppressed before this many */
} cal_srv_request;

/* Default max_tokens when a request gives none: 16 for completions (as
 * OpenAI), the rest of the context capped at 256 for chat. */
#define CAL_SRV_DEFAULT_MAX_TOKENS      16
#define CAL_SRV_DEFAULT_CHAT_MAX_TOKENS 256

/* Parse a completions or chat body of n bytes (need not be NUL-terminated).
 * On success fills *out and returns CAL_OK. On a bad body returns CAL_EINVAL
 * (CAL_ENOMEM on allocation failure) with *err filled and *out zeroed. */
int cal_srv_parse_request(cal_srv_api api, const char *body, size_t n,
                          const cal_srv_limits *lim, cal_srv_request *out,
                          cal_srv_error *err);
void cal_srv_request_free(cal_srv_request *r);

/* POST /tokenize: {"prompt": text} or {"content": text}. On success *text
 * (malloc'd, caller frees) and *len are set. CAL_EINVAL with *err otherwise. */
int cal_srv_parse_tokenize(const char *body, size_t n, char **text, size_t *len,
                           cal_srv_error *err);
/* The flags of a /tokenize body as llama-server reads them: "add_special"
 * (default false: no BOS/EOS) and "parse_special" (default true: control
 * tokens written in the text are matched) as CAL_TOK_* flags in *flags.
 * CAL_EINVAL with *err for a field that is not a boolean. */
int cal_srv_parse_tokenize_flags(const char *body, size_t n, int *flags, cal_srv_error *err);

/* POST /detokenize: {"tokens": [id, ...]}, each id in 0..vocab-1. On success
 * *ids (malloc'd, caller frees) and *n_ids; CAL_EINVAL with *err naming the
 * element otherwise; CAL_ETOOBIG (413) past max_ids. */
int cal_srv_parse_detokenize(const char *body, size_t n, int vocab, int max_ids,
                             int32_t **ids, int *n_ids, cal_srv_error *err);

/* Resolve max_tokens against the prompt length and the context:
 * prompt empty → 400 "prompt"; prompt alone ≥ max_ctx → 400 "prompt";
 * prompt + max_tokens > max_ctx → 400 "max_tokens"; min_tokens > max_tokens
 * → 400 "min_tokens". On success r->max_tokens holds the resolved value. */
int cal_srv_check_context(cal_srv_request *r, int n_prompt, int max_ctx,
                          cal_srv_error *err);

/* Fill *err (printf-style message). */
void cal_srv_error_set(cal_srv_error *err, int status, const char *type,
                       const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* The error as a JSON body, malloc'd (caller frees); NULL on ENOMEM. */
char *cal_srv_error_json(const cal_srv_error *err);

#endif
