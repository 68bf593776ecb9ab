/* The one schema table (schema.h): every field of a cell's summary with its
 * key, unit, statistic, column, better direction, pooling rule, decimals and
 * doc, and the names of the schema's enums (shot kinds and columns too). The store's columns, the exports, the report, compare and the
 * terminal tables all read it. Keys follow vLLM's bench JSON where the
 * meaning is the same. */
#include <math.h>
#include <stddef.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/schema.h"
#include "caliper/store.h"

#define AGG CAL_COL_AGGREGATE
#define REQ CAL_COL_PER_REQUEST
#define HI CAL_BETTER_HIGHER
#define LO CAL_BETTER_LOWER
#define NO CAL_BETTER_NONE
/* count: an int64_t summed over shots */
#define CNT(m, n, label, d) [m] = { #n, label, "", CAL_FIELD_INT, offsetof(cal_summary, n), \
    CAL_STAT_SUM, AGG, NO, CAL_POOL_SUM, -1, 0, d }
/* a real: key, label, unit, statistic, column, better, pool, series, decimals, doc */
#define F(m, n, label, u, st, col, b, pool, ser, k, d) [m] = { #n, label, u, CAL_FIELD_REAL, \
    offsetof(cal_summary, n), CAL_STAT_##st, col, b, CAL_POOL_##pool, ser, k, d }

const cal_field cal_summary_fields[CAL_M__N] = {
    F(CAL_M_DURATION, duration, "duration", "s", SUM, AGG, NO, SUM, -1, 3,
      "first send to last end of the cell (pooled: the shots' durations summed)"),
    CNT(CAL_M_COMPLETED, completed, "ok", "requests that ended ok"),
    CNT(CAL_M_FAILED, failed, "failed", "requests that did not end ok (all other statuses)"),
    CNT(CAL_M_N_HTTP_ERROR, n_http_error, "HTTP errors", "non-2xx answers"),
    CNT(CAL_M_N_TIMEOUT, n_timeout, "timeouts", "connect or idle timeouts"),
    CNT(CAL_M_N_CONNECT_ERROR, n_connect_error, "connect errors", "could not connect"),
    CNT(CAL_M_N_STREAM_ERROR, n_stream_error, "stream errors", "truncated or malformed streams"),
    CNT(CAL_M_N_CANCELLED, n_cancelled, "cancelled", "stopped by the user or the deadline"),
    CNT(CAL_M_INPUT_TOKENS, total_input_tokens, "input tokens", "prompt tokens over ok requests"),
    CNT(CAL_M_OUTPUT_TOKENS, total_output_tokens, "output tokens", "output tokens over ok requests"),
    CNT(CAL_M_OUTPUT_LEN_MISMATCH, output_len_mismatch, "output length mismatches",
        "ok requests whose output length differs from max_tokens under a fixed policy"),
    F(CAL_M_REQ_THROUGHPUT, request_throughput, "requests/s", "req/s", RATE, AGG, HI, RATE, -1, 3,
      "completed ÷ duration"),
    F(CAL_M_AGG_TOKS, output_throughput, "aggregate tok/s", "tok/s", RATE, AGG, HI, RATE, CAL_S_AGG_TOKS, 1,
      "aggregate: all output tokens ÷ the cell's wall clock"),
    F(CAL_M_REQ_TOKS, per_request_output_throughput_median, "per-request tok/s (median)", "tok/s",
      P50, REQ, HI, REQUESTS, CAL_S_REQ_TOKS, 1,
      "per-request: median of each request's output tokens ÷ its own E2E"),
    F(CAL_M_TTFT_MEAN, mean_ttft_ms, "TTFT mean", "ms", MEAN, REQ, LO, REQUESTS, CAL_S_TTFT_MS, 1, "time to first token, mean"),
    F(CAL_M_TTFT_P50, median_ttft_ms, "TTFT p50", "ms", P50, REQ, LO, REQUESTS, CAL_S_TTFT_MS, 1, "time to first token, p50"),
    F(CAL_M_TTFT_P95, p95_ttft_ms, "TTFT p95", "ms", P95, REQ, LO, REQUESTS, CAL_S_TTFT_MS, 1, "time to first token, p95"),
    F(CAL_M_TTFT_P99, p99_ttft_ms, "TTFT p99", "ms", P99, REQ, LO, REQUESTS, CAL_S_TTFT_MS, 1, "time to first token, p99"),
    F(CAL_M_TPOT_MEAN, mean_tpot_ms, "TPOT mean", "ms", MEAN, REQ, LO, REQUESTS, CAL_S_TPOT_MS, 2, "(E2E − TTFT) ÷ (output − 1), mean"),
    F(CAL_M_TPOT_P50, median_tpot_ms, "TPOT p50", "ms", P50, REQ, LO, REQUESTS, CAL_S_TPOT_MS, 2, "(E2E − TTFT) ÷ (output − 1), p50"),
    F(CAL_M_TPOT_P99, p99_tpot_ms, "TPOT p99", "ms", P99, REQ, LO, REQUESTS, CAL_S_TPOT_MS, 2, "(E2E − TTFT) ÷ (output − 1), p99"),
    F(CAL_M_ITL_MEAN, mean_itl_ms, "ITL mean", "ms", MEAN, REQ, LO, REQUESTS, CAL_S_ITL_MS, 2, "gap between consecutive content chunks, mean"),
    F(CAL_M_ITL_P50, median_itl_ms, "ITL p50", "ms", P50, REQ, LO, REQUESTS, CAL_S_ITL_MS, 2, "gap between consecutive content chunks, p50"),
    F(CAL_M_ITL_P99, p99_itl_ms, "ITL p99", "ms", P99, REQ, LO, REQUESTS, CAL_S_ITL_MS, 2, "gap between consecutive content chunks, p99"),
    F(CAL_M_E2E_MEAN, mean_e2el_ms, "E2E mean", "ms", MEAN, REQ, LO, REQUESTS, CAL_S_E2E_MS, 1, "end-to-end latency from the scheduled send, mean"),
    F(CAL_M_E2E_P50, median_e2el_ms, "E2E p50", "ms", P50, REQ, LO, REQUESTS, CAL_S_E2E_MS, 1, "end-to-end latency from the scheduled send, p50"),
    F(CAL_M_E2E_P99, p99_e2el_ms, "E2E p99", "ms", P99, REQ, LO, REQUESTS, CAL_S_E2E_MS, 1, "end-to-end latency from the scheduled send, p99"),
    F(CAL_M_PREFILL_TOKS, prefill_tps_median, "prefill tok/s", "tok/s", P50, REQ, HI, REQUESTS, CAL_S_PREFILL_TOKS, 1,
      "prompt tokens ÷ TTFT, median: a lower bound on prefill speed"),
    F(CAL_M_DECODE_TOKS, decode_tps_median, "decode tok/s", "tok/s", P50, REQ, HI, REQUESTS, CAL_S_DECODE_TOKS, 1,
      "(output − 1) ÷ (last − first token), median"),
    F(CAL_M_SERVER_DECODE_TOKS, server_decode_tps_median, "server decode tok/s", "tok/s", P50, REQ, HI, REQUESTS, CAL_S_SERVER_DECODE_TOKS, 1,
      "(server decode tokens − 1) ÷ the server's decode time, median"),
    F(CAL_M_CLOCK_MHZ, clock_mhz_mean, "clock MHz", "MHz", MEAN, AGG, NO, TIME_MEAN, -1, 0,
      "mean clock over the cell (telemetry; pooled: weighted by each shot's duration)"),
    F(CAL_M_POWER_W, power_w_mean, "power W", "W", MEAN, AGG, NO, TIME_MEAN, -1, 1,
      "mean power over the cell (telemetry; pooled: weighted by each shot's duration)"),
    F(CAL_M_TOTAL_TOKS, total_token_throughput, "total tok/s", "tok/s", RATE, AGG, HI, RATE, -1, 1,
      "(input + output tokens of ok requests) ÷ duration"),
    F(CAL_M_TTFT_SD, std_ttft_ms, "TTFT sd", "ms", SD, REQ, NO, REQUESTS, CAL_S_TTFT_MS, 1, "time to first token, sample standard deviation"),
    F(CAL_M_TPOT_SD, std_tpot_ms, "TPOT sd", "ms", SD, REQ, NO, REQUESTS, CAL_S_TPOT_MS, 2, "(E2E − TTFT) ÷ (output − 1), sample standard deviation"),
    F(CAL_M_ITL_SD, std_itl_ms, "ITL sd", "ms", SD, REQ, NO, REQUESTS, CAL_S_ITL_MS, 2, "gap between consecutive content chunks, sample standard deviation"),
    F(CAL_M_E2E_SD, std_e2el_ms, "E2E sd", "ms", SD, REQ, NO, REQUESTS, CAL_S_E2E_MS, 1, "end-to-end latency, sample standard deviation"),
    F(CAL_M_CLOCK_MIN, clock_mhz_min, "clock min MHz", "MHz", MIN, AGG, NO, MIN, -1, 0, "lowest clock reading over the cell (telemetry)"),
    F(CAL_M_POWER_MIN, power_w_min, "power min W", "W", MIN, AGG, NO, MIN, -1, 1, "lowest power reading over the cell (telemetry)"),
    F(CAL_M_GOODPUT, goodput, "goodput", "req/s", RATE, AGG, HI, RATE, -1, 3,
      "requests that ended ok and met every SLO bound ÷ duration (unknown without an SLO)"),
};
const size_t cal_summary_n_fields = CAL_M__N;

const cal_field *cal_summary_field(const char *name)
{
    int m = cal_metric_find(name);
    return m < 0 ? NULL : &cal_summary_fields[m];
}

const cal_field *cal_metric_get(cal_metric m)
{
    return &cal_summary_fields[(unsigned)m < CAL_M__N ? m : 0];
}

int cal_metric_find(const char *key)
{
    for (int i = 0; key && i < CAL_M__N; i++)
        if (!strcmp(cal_summary_fields[i].name, key)) return i;
    return -1;
}

int cal_metric_comparable(cal_metric m)
{
    return (unsigned)m < CAL_M__N && cal_summary_fields[m].stat != CAL_STAT_SUM;
}

double cal_stat_pct(cal_stat s)
{
    return s == CAL_STAT_P50 ? 50 : s == CAL_STAT_P95 ? 95 : s == CAL_STAT_P99 ? 99 : NAN;
}

static const char *const STAT_NAMES[CAL_STAT__N] = {"sum", "rate", "mean", "p50", "p95", "p99", "sd", "min"};
static const char *const BETTER_NAMES[] = {"none", "higher", "lower"};
static const char *const POOL_NAMES[CAL_POOL__N] = {"sum", "rate", "requests", "time-mean", "min"};
static const char *const SERIES_KEYS[CAL_S__N] = {
    "output_throughput", "request_tok_s", "prefill_tok_s", "decode_tok_s",
    "ttft_ms", "itl_ms", "tpot_ms", "e2el_ms", "server_decode_tok_s",
};

const char *cal_stat_name(cal_stat s) { return STAT_NAMES[(unsigned)s < CAL_STAT__N ? s : 0]; }
const char *cal_better_name(cal_better b) { return BETTER_NAMES[(unsigned)b < 3 ? b : 0]; }
const char *cal_pool_name(cal_pool p) { return POOL_NAMES[(unsigned)p < CAL_POOL__N ? p : 0]; }
const char *cal_series_key(cal_series s) { return (unsigned)s < CAL_S__N ? SERIES_KEYS[s] : "?"; }

int cal_series_find(const char *key)
{
    for (int i = 0; key && i < CAL_S__N; i++)
        if (!strcmp(SERIES_KEYS[i], key)) return i;
    return -1;
}

double cal_summary_get(const cal_summary *s, const cal_field *f)
{
    const char *p = (const char *)s + f->offset;
    if (f->type == CAL_FIELD_INT) {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return (double)v;
    }
    double d;
    memcpy(&d, p, sizeof d);
    return d;
}

void cal_summary_set(cal_summary *s, const cal_field *f, double v)
{
    char *p = (char *)s + f->offset;
    if (f->type == CAL_FIELD_INT) {
        int64_t i = !isfinite(v) ? 0 : v > 9e15 ? (int64_t)9e15 : v < -9e15 ? (int64_t)-9e15 : (int64_t)v;
        memcpy(p, &i, sizeof i);
    } else memcpy(p, &v, sizeof v);
}

void cal_summary_init(cal_summary *s)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < cal_summary_n_fields; i++)
        if (cal_summary_fields[i].type == CAL_FIELD_REAL) {
            double nan = NAN;
            memcpy((char *)s + cal_summary_fields[i].offset, &nan, sizeof nan);
        }
}

/* The one table of shot-kind keys (JSON, CSV, the store, the terminal). */
static const char *const SHOT_KEYS[] = {
    [CAL_SHOT_UNKNOWN] = "unknown", [CAL_SHOT_COLD] = "cold", [CAL_SHOT_WARM] = "warm",
    [CAL_SHOT_RESTED] = "rested", [CAL_SHOT_WARMUP] = "warmup",
    [CAL_SHOT_CONSECUTIVE] = "consecutive",
};
#define N_SHOT_KEYS (sizeof SHOT_KEYS / sizeof SHOT_KEYS[0])

const char *cal_shot_kind_key(cal_shot_kind k)
{
    return (unsigned)k < N_SHOT_KEYS ? SHOT_KEYS[k] : SHOT_KEYS[CAL_SHOT_UNKNOWN];
}

static const char *const BASIS_KEYS[CAL_PROMPT__N] = {
    [CAL_PROMPT_UNRECORDED] = "unrecorded", [CAL_PROMPT_CONFIRMED] = "confirmed",
    [CAL_PROMPT_UNCONFIRMED] = "unconfirmed", [CAL_PROMPT_SERVER] = "server",
    [CAL_PROMPT_NO_TOKENIZE] = "no-tokenize", [CAL_PROMPT_TOKENIZER_FAILED] = "tokenizer-failed",
    [CAL_PROMPT_BELOW_SHORTEST] = "below-shortest", [CAL_PROMPT_NEAREST] = "nearest",
    [CAL_PROMPT_MIXED] = "mixed", [CAL_PROMPT_ENGINE] = "engine",
    [CAL_PROMPT_ESTIMATED] = "estimated",
};

const char *cal_prompt_basis_key(cal_prompt_basis b)
{
    return (unsigned)b < CAL_PROMPT__N ? BASIS_KEYS[b] : BASIS_KEYS[CAL_PROMPT_UNRECORDED];
}

int cal_prompt_basis_parse(const char *s, cal_prompt_basis *out)
{
    for (int i = 0; s && i < CAL_PROMPT__N; i++)
        if (!strcmp(s, BASIS_KEYS[i])) { *out = (cal_prompt_basis)i; return CAL_OK; }
    return CAL_EINVAL;
}

int cal_prompt_basis_exact(cal_prompt_basis b)
{
    return b == CAL_PROMPT_CONFIRMED || b == CAL_PROMPT_UNCONFIRMED || b == CAL_PROMPT_ENGINE;
}

/* The human name is the key, except where words read better. */
const char *cal_shot_kind_name(cal_shot_kind k)
{
    if (k == CAL_SHOT_WARMUP) return "warm-up";
    if (k == CAL_SHOT_CONSECUTIVE) return "mean of consecutive requests, no cold/warm split";
    return cal_shot_kind_key(k);
}

int cal_shot_kind_parse(const char *s, cal_shot_kind *out)
{
    if (!s) return CAL_EINVAL;
    for (size_t i = 0; i < N_SHOT_KEYS; i++)
        if (!strcmp(s, SHOT_KEYS[i])) { *out = (cal_shot_kind)i; return CAL_OK; }
    /* the human names cal_shot_kind_name prints read back too */
    for (size_t i = 0; i < N_SHOT_KEYS; i++)
        if (!strcmp(s, cal_shot_kind_name((cal_shot_kind)i))) { *out = (cal_shot_kind)i; return CAL_OK; }
    return CAL_EINVAL;
}

const char *cal_column_name(cal_column c)
{
    return c == CAL_COL_PER_REQUEST ? "per-request" : "aggregate";
}
