/* caliper schema — the one table of summary fields (llama-bench style).
 * Each field of a cell's summary has one key, unit, statistic, column,
 * better direction, pooling rule, decimals and line of doc, and that table
 * drives every output: the store's cells columns, export JSON and CSV, the
 * report's tables and JSON, compare's rows and the terminal tables. Keys
 * are vLLM's bench names where the meaning is the same.
 *
 * The table itself is cal_summary_fields (store.h), indexed by cal_metric:
 * cal_summary_fields[m] describes metric m. Also here: one name table per
 * enum of the schema (shot kind, column, statistic, better direction,
 * pooling rule, series). */
#ifndef CALIPER_SCHEMA_H
#define CALIPER_SCHEMA_H
#include <stddef.h>

/* Which shots a number comes from, and which column it is in: the words
 * every fingerprint (fingerprint.h), stored row and output uses. */
typedef enum cal_shot_kind {
    CAL_SHOT_UNKNOWN = 0, /* not recorded */
    CAL_SHOT_COLD,        /* first shot of a fresh engine process */
    CAL_SHOT_WARM,        /* a later shot in the same process, no rest */
    CAL_SHOT_RESTED,      /* a later shot after a rest */
    CAL_SHOT_WARMUP,      /* recorded but excluded from summaries */
    CAL_SHOT_CONSECUTIVE  /* a foreign tool's mean of consecutive requests,
                             no cold/warm split (vLLM bench serve, ...) */
} cal_shot_kind;

typedef enum cal_column {
    CAL_COL_AGGREGATE = 0, /* all output tokens ÷ the cell's wall clock */
    CAL_COL_PER_REQUEST    /* a per-request quantity, summarised (median, pXX) */
} cal_column;

/* "cold", "warm", "rested", "warm-up", "mean of consecutive requests, no
 * cold/warm split", "unknown". Never NULL. */
const char *cal_shot_kind_name(cal_shot_kind k);
/* The key of a kind, spelled once for every output and the store:
 * "unknown", "cold", "warm", "rested", "warmup", "consecutive". Never NULL. */
const char *cal_shot_kind_key(cal_shot_kind k);
/* Inverse of the keys (and of cal_shot_kind_name's names); CAL_EINVAL for
 * anything else. */
int cal_shot_kind_parse(const char *s, cal_shot_kind *out);
const char *cal_column_name(cal_column c);   /* "aggregate", "per-request" */

/* How a cell's prompt length was made and what checked it: the reason a
 * length is exact or approximate, stored with the cell (schema 9) so every
 * verdict that explains a length says the true one. */
typedef enum cal_prompt_basis {
    CAL_PROMPT_UNRECORDED = 0,   /* stored before the reason was: prompt_exact alone */
    CAL_PROMPT_CONFIRMED,        /* built with the server's /tokenize, and every
                                    request's usage.prompt_tokens agreed with it
                                    (less what the server adds to every prompt) */
    CAL_PROMPT_UNCONFIRMED,      /* built with /tokenize; the server reported no
                                    usage.prompt_tokens to confirm it */
    CAL_PROMPT_SERVER,           /* built with /tokenize, but the server counted
                                    otherwise: the length is the server's count */
    CAL_PROMPT_NO_TOKENIZE,      /* the target has no /tokenize: 4 characters a token */
    CAL_PROMPT_TOKENIZER_FAILED, /* its /tokenize failed: 4 characters a token */
    CAL_PROMPT_BELOW_SHORTEST,   /* below the nonce line's own tokens: the line alone */
    CAL_PROMPT_NEAREST,          /* no cut of the text counted the length: the nearest */
    CAL_PROMPT_MIXED,            /* one length a request (a dataset, drawn lengths):
                                    each request's is the server's count */
    CAL_PROMPT_ENGINE,           /* counted by the engine's own tokenizer (in-process) */
    CAL_PROMPT_ESTIMATED,        /* cut at the content's characters per token and
                                    corrected once against /tokenize, a prompt a
                                    request (drawn output lengths) */
    CAL_PROMPT__N
} cal_prompt_basis;
/* "unrecorded", "confirmed", "unconfirmed", "server", "no-tokenize",
 * "tokenizer-failed", "below-shortest", "nearest", "mixed", "engine",
 * "estimated"; the first for anything out of range. */
const char *cal_prompt_basis_key(cal_prompt_basis b);
/* Inverse of the keys; CAL_EINVAL for anything else. */
int cal_prompt_basis_parse(const char *s, cal_prompt_basis *out);
/* 1 when a length of that basis is exact (confirmed, unconfirmed, engine). */
int cal_prompt_basis_exact(cal_prompt_basis b);

/* Sample series a summary statistic is taken over: per request (or per shot
 * for the aggregate), in the units the names carry. */
typedef enum cal_series {
    CAL_S_AGG_TOKS = 0,  /* per-shot aggregate output tok/s */
    CAL_S_REQ_TOKS,      /* per-request output tok/s (tokens ÷ own duration from send) */
    CAL_S_PREFILL_TOKS,  /* per-request prefill tok/s: prompt ÷ TTFT */
    CAL_S_DECODE_TOKS,   /* per-request decode tok/s: (out − 1) ÷ (last − first token) */
    CAL_S_TTFT_MS,       /* time to first token from the scheduled send, ms */
    CAL_S_ITL_MS,        /* inter-chunk gaps, ms */
    CAL_S_TPOT_MS,       /* (E2E − TTFT) ÷ (tokens − 1), ms */
    CAL_S_E2E_MS,        /* whole request from the scheduled send, ms */
    CAL_S_SERVER_DECODE_TOKS, /* per-request server decode tok/s: (n − 1) ÷ server decode time */
    CAL_S__N
} cal_series;
/* "output_throughput", "request_tok_s", "prefill_tok_s", "decode_tok_s",
 * "ttft_ms", "itl_ms", "tpot_ms", "e2el_ms", "server_decode_tok_s"; "?" out
 * of range. A request's value of a series: cal_req_value (series.h). */
const char *cal_series_key(cal_series s);
int cal_series_find(const char *key);       /* -1 when unknown */

/* The metrics, in the order of the table (and of the store's columns). */
typedef enum cal_metric {
    CAL_M_DURATION = 0, CAL_M_COMPLETED, CAL_M_FAILED,
    CAL_M_N_HTTP_ERROR, CAL_M_N_TIMEOUT, CAL_M_N_CONNECT_ERROR, CAL_M_N_STREAM_ERROR,
    CAL_M_N_CANCELLED, CAL_M_INPUT_TOKENS, CAL_M_OUTPUT_TOKENS, CAL_M_OUTPUT_LEN_MISMATCH,
    CAL_M_REQ_THROUGHPUT,
    CAL_M_AGG_TOKS,      /* output_throughput */
    CAL_M_REQ_TOKS,      /* per_request_output_throughput_median */
    CAL_M_TTFT_MEAN, CAL_M_TTFT_P50, CAL_M_TTFT_P95, CAL_M_TTFT_P99,
    CAL_M_TPOT_MEAN, CAL_M_TPOT_P50, CAL_M_TPOT_P99,
    CAL_M_ITL_MEAN, CAL_M_ITL_P50, CAL_M_ITL_P99,
    CAL_M_E2E_MEAN, CAL_M_E2E_P50, CAL_M_E2E_P99,
    CAL_M_PREFILL_TOKS,  /* prefill_tps_median */
    CAL_M_DECODE_TOKS,   /* decode_tps_median */
    CAL_M_SERVER_DECODE_TOKS,
    CAL_M_CLOCK_MHZ,     /* clock_mhz_mean */
    CAL_M_POWER_W,       /* power_w_mean */
    CAL_M_TOTAL_TOKS,    /* total_token_throughput */
    CAL_M_TTFT_SD, CAL_M_TPOT_SD, CAL_M_ITL_SD, CAL_M_E2E_SD,
    CAL_M_CLOCK_MIN, CAL_M_POWER_MIN,
    CAL_M_GOODPUT,       /* goodput: requests meeting every SLO bound ÷ duration */
    CAL_M__N
} cal_metric;

typedef enum cal_stat {
    CAL_STAT_SUM = 0,   /* a count, a total, the wall clock */
    CAL_STAT_RATE,      /* a total ÷ the wall clock */
    CAL_STAT_MEAN, CAL_STAT_P50, CAL_STAT_P95, CAL_STAT_P99, CAL_STAT_SD,
    CAL_STAT_MIN,
    CAL_STAT__N
} cal_stat;
const char *cal_stat_name(cal_stat s);   /* "sum", "rate", "mean", "p50", "p95", "p99", "sd", "min" */

typedef enum cal_better {
    CAL_BETTER_NONE = 0,   /* neither (counts, clock, power) */
    CAL_BETTER_HIGHER,     /* throughput */
    CAL_BETTER_LOWER       /* latency */
} cal_better;
const char *cal_better_name(cal_better b);   /* "none", "higher", "lower" */

/* How a field pools over several shots (analysis.h states each rule). */
typedef enum cal_pool {
    CAL_POOL_SUM = 0, CAL_POOL_RATE, CAL_POOL_REQUESTS, CAL_POOL_TIME_MEAN, CAL_POOL_MIN,
    CAL_POOL__N
} cal_pool;
const char *cal_pool_name(cal_pool p);   /* "sum", "rate", "requests", "time-mean", "min" */

typedef enum cal_field_type { CAL_FIELD_INT, CAL_FIELD_REAL } cal_field_type;

typedef struct cal_field {
    const char    *name;      /* key: JSON key, CSV header, SQL column */
    const char    *label;     /* table head: "aggregate tok/s", "TTFT p95" */
    const char    *unit;      /* "s", "ms", "tok/s", "req/s", "MHz", "W", "" */
    cal_field_type type;      /* int64_t or double at offset */
    size_t         offset;    /* offsetof(cal_summary, …) */
    cal_stat       stat;      /* the statistic */
    cal_column     column;    /* aggregate (per cell) or per-request */
    cal_better     better;    /* which way is better */
    cal_pool       pool;      /* how shots pool */
    int            series;    /* cal_series the statistic is over, -1 none */
    int            decimals;  /* for printing */
    const char    *doc;       /* one line, for docs and --help */
} cal_field;

/* The field of metric m; never NULL (m out of range gives metric 0). */
const cal_field *cal_metric_get(cal_metric m);
/* The metric of a key, or -1. */
int cal_metric_find(const char *key);
/* The percentile a statistic is (50, 95, 99), NAN for the others. */
double cal_stat_pct(cal_stat s);
/* 1 when a ratio of two values means something (not a count or a wall clock). */
int cal_metric_comparable(cal_metric m);

#endif
