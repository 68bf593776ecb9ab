/* caliper workload — the prompts a run sends: a content class (code, prose
 * — texts the project wrote, in data/ — or random words), a prompt length
 * made exact with the server's tokenizer where it has one (else marked
 * approximate at 4 characters per token), and a unique nonce line at the
 * start of every prompt so a prefix cache cannot flatter a rerun.
 *
 * Ownership: cal_workload_open copies the config; prompts returned by
 * cal_workload_prompt are malloc'd and the caller frees them. The token
 * counter is the caller's (a fake one in tests, POST /tokenize in a run). */
#ifndef CALIPER_WORKLOAD_H
#define CALIPER_WORKLOAD_H
#include <stddef.h>
#include <stdint.h>

typedef enum cal_content {
    CAL_CONTENT_PROSE = 0,
    CAL_CONTENT_CODE,
    CAL_CONTENT_RANDOM
} cal_content;
const char *cal_content_name(cal_content c);            /* "prose", "code", "random" */
int cal_content_parse(const char *s, cal_content *out); /* CAL_EINVAL if unknown */
/* The source text of a class (static, NUL-terminated; random is generated
 * once from a fixed seed). *len gets its length in bytes. */
const char *cal_content_text(cal_content c, size_t *len);

/* Count the tokens of text. Returns CAL_OK, CAL_EABSENT (the server has no
 * tokenizer endpoint: the workload becomes approximate), or another error. */
typedef int (*cal_count_tokens_fn)(void *ud, const char *text, int *n_tokens);
/* Count texts[0..n) into counts[0..n); the calls may go out concurrently.
 * CAL_OK, or the first error (counts then partly unset). */
typedef int (*cal_count_many_fn)(void *ud, const char *const *texts, size_t n, int *counts);
/* The token ids of text: *ids malloc'd (the caller frees), *n of them.
 * CAL_EABSENT when the tokenizer gives a count but no ids. */
typedef int (*cal_token_ids_fn)(void *ud, const char *text, int32_t **ids, int *n);

typedef struct cal_workload_config {
    cal_content content;
    int         prompt_tokens;   /* wanted length, >= 1 */
    int         unique;          /* 1: a nonce line makes every prompt unique */
    uint64_t    seed;            /* nonces derive from it */
    cal_count_tokens_fn count;   /* NULL: approximate */
    void       *count_ud;        /* passed to count, count_many and token_ids */
    cal_count_many_fn count_many;   /* NULL: count one text after another */
    cal_token_ids_fn  token_ids;    /* NULL: nonce lines are counted one by one */
    int         per_prompt;      /* 1: count every prompt (no construction) */
} cal_workload_config;

typedef struct cal_workload cal_workload;

/* Find the text prefix that makes prompt_tokens tokens (with a nonce line
 * of the same shape as every request's). CAL_EINVAL (bad config),
 * CAL_ENOMEM, or an error from count other than CAL_EABSENT. */
int  cal_workload_open(const cal_workload_config *cfg, cal_workload **out);
void cal_workload_close(cal_workload **w);
/* 1 when prompts are checked against the server's tokenizer and every
 * prompt made so far has exactly prompt_tokens tokens: 0 without a
 * tokenizer, below cal_workload_shortest_exact, or once a prompt had to use
 * the nearest length. A cell built from its prompts is labelled with it. */
int  cal_workload_exact(const cal_workload *w);
/* The shortest prompt length this workload can make exact: the tokens of
 * the nonce line alone (1 without nonces); 0 when no tokenizer answered. A
 * prompt_tokens below it gives prompts of the nonce line alone, approximate. */
int  cal_workload_shortest_exact(const cal_workload *w);
/* The counter calls made so far (the cost of exactness). */
int  cal_workload_count_calls(const cal_workload *w);

/* Prompt number index: the nonce line (when unique) then the text prefix.
 * When exact, prompts are built by construction (docs/workload.md): the
 * nonce lines of a block of indices are counted in one call (their ids
 * split at the newline), each prompt takes the cut of the text that has
 * prompt_tokens minus its nonce line's tokens (one search per distinct
 * nonce length), and a sample of the block's prompts is counted whole. A
 * sample that disagrees means the tokenizer merges across the seam: from
 * then on every prompt is counted (concurrently) and nudged where off, and
 * cal_workload_note says so. *n_tokens gets the count (-1 when
 * approximate; when no prefix gives exactly the count, the nearest is used
 * and *n_tokens is its count). *out is malloc'd. */
int  cal_workload_prompt(cal_workload *w, uint64_t index, char **out, int *n_tokens);
/* Prepare the prompts of indices [first, first + n) at once (a hint: a
 * prompt outside any prepared block prepares a block of its own). */
int  cal_workload_prepare(cal_workload *w, uint64_t first, size_t n);
/* Why prompts are counted one by one (the seam merges, or no ids), for the
 * run's notes; NULL while the construction holds. */
const char *cal_workload_note(const cal_workload *w);
/* Prompts counted whole so far to verify the construction (its sample). */
int  cal_workload_sampled(const cal_workload *w);

/* ---- the server's tokenizer over HTTP (POST /tokenize) ----------------
 * Sends {"model":…, "prompt": text, "content": text} (the vLLM and
 * llama.cpp shapes at once) and reads "count" or the length of "tokens".
 * A 404/405/501 answer is CAL_EABSENT. */
typedef struct cal_http_tokenizer cal_http_tokenizer;
/* timeout_ns bounds each call as a whole, connecting included (0 = 30 s):
 * a server that accepts and never answers, or trickles its answer, must not
 * stall the run. A call that times out (CAL_ETIMEDOUT), cannot connect
 * (CAL_ECONNECT) or is stopped (CAL_ECANCEL) makes every later call fail
 * the same way at once, until cal_http_tokenizer_retarget (a stop stays).
 * api_key: NULL for none; CAL_ETOOBIG over CAL_API_KEY_MAX bytes (auth.h). */
int  cal_http_tokenizer_open(const char *base_url, const char *model, const char *api_key,
                             int64_t timeout_ns, cal_http_tokenizer **out);
/* The caller's Ctrl-C flag (NULL: none): read at least every 100 ms while a
 * call waits; non-zero ends it with CAL_ECANCEL. */
void cal_http_tokenizer_set_stop(cal_http_tokenizer *t, volatile int *stop);
/* What the failure that ends every call was, one line ("POST /tokenize
 * timed out after 30 s with no answer", "... the answer came too slowly
 * ..."); NULL when calls have not failed so. */
const char *cal_http_tokenizer_why(const cal_http_tokenizer *t);
int  cal_http_tokenizer_count(void *tokenizer, const char *text, int *n_tokens);
/* Many texts, CAL_TOKENIZE_POOL calls in flight at once (one curl multi,
 * the caller's thread): a cal_count_many_fn. */
#define CAL_TOKENIZE_POOL 8
int  cal_http_tokenizer_count_many(void *tokenizer, const char *const *texts, size_t n,
                                   int *counts);
/* The answer's "tokens" (integers, or llama.cpp's {"id":…} objects): a
 * cal_token_ids_fn; CAL_EABSENT when the server sends only "count". */
int  cal_http_tokenizer_ids(void *tokenizer, const char *text, int32_t **ids, int *n);
/* Read one POST /tokenize answer, body[len] (the server's bytes, any of
 * them): the count ("count", else the length of "tokens") into *count, and
 * with ids non-NULL the "tokens" (integers, or llama.cpp's {"id": ...}
 * objects) into *ids (malloc'd, the caller frees; NULL when the call
 * fails) and *n. CAL_EPROTO for a body that is not such an answer: not a
 * JSON object, neither key, a count outside [0, 2^31) or unequal to the
 * tokens given, an id outside [0, 2^31); CAL_EABSENT when ids are asked
 * and only a count is there; CAL_ENOMEM. *count is -1 on failure. */
int  cal_tokenize_answer(const char *body, size_t len, int *count, int32_t **ids, int *n);
/* The tokens the server adds to a prompt of its own (a BOS): text counted
 * with "add_special" (and vLLM's "add_special_tokens") true, less without.
 * A server that ignores the flag gives 0. CAL_EPROTO when the difference is
 * negative or over 64 (no tokenizer adds that many). */
int  cal_http_tokenizer_specials(void *tokenizer, const char *text, int *n_special);
/* Point it at a new base URL (a restarted engine on another port); the
 * workloads that hold it keep working. CAL_ETOOBIG for an over-long URL. */
int  cal_http_tokenizer_retarget(cal_http_tokenizer *t, const char *base_url);
void cal_http_tokenizer_close(cal_http_tokenizer **t);

#endif
