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

typedef struct cal_workload_config {
    cal_content content;
    int         prompt_tokens;   /* wanted length, >= 1 */
    int         unique;          /* 1: a nonce line makes every prompt unique */
    uint64_t    seed;            /* nonces derive from it */
    cal_count_tokens_fn count;   /* NULL: approximate */
    void       *count_ud;
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
 * When exact, the prompt is counted and its prefix nudged until it has
 * prompt_tokens tokens — for the first 32 prompts, and for every prompt
 * once any nonce needed a nudge (the nonce has one shape, so 32 clean
 * counts in a row mean the base prefix holds without a round trip each).
 * *n_tokens gets the count (-1 when approximate; when no prefix gives
 * exactly the count, the nearest is used and *n_tokens is its count).
 * *out is malloc'd. */
int  cal_workload_prompt(cal_workload *w, uint64_t index, char **out, int *n_tokens);

/* ---- the server's tokenizer over HTTP (POST /tokenize) ----------------
 * Sends {"model":…, "prompt": text, "content": text} (the vLLM and
 * llama.cpp shapes at once) and reads "count" or the length of "tokens".
 * A 404/405/501 answer is CAL_EABSENT. */
typedef struct cal_http_tokenizer cal_http_tokenizer;
/* timeout_ns bounds each call, connecting included (0 = 30 s): a server
 * that accepts and never answers must not stall the run. */
int  cal_http_tokenizer_open(const char *base_url, const char *model, const char *api_key,
                             int64_t timeout_ns, cal_http_tokenizer **out);
int  cal_http_tokenizer_count(void *tokenizer, const char *text, int *n_tokens);
/* Point it at a new base URL (a restarted engine on another port); the
 * workloads that hold it keep working. CAL_ETOOBIG for an over-long URL. */
int  cal_http_tokenizer_retarget(cal_http_tokenizer *t, const char *base_url);
void cal_http_tokenizer_close(cal_http_tokenizer **t);

#endif
