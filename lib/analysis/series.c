/* The per-request series (series.h): each formula of docs/metrics.md once,
 * and the table of export's per-request fields. */
#include <math.h>
#include <stddef.h>
#include "caliper/series.h"

int64_t cal_req_base_ns(const cal_req_result *r)
{
    if (!r) return 0;
    return r->sched_ns > 0 ? r->sched_ns : r->send_ns > 0 ? r->send_ns : 0;
}

/* b − a, ms, when both instants are known */
static double span_ms(int64_t a, int64_t b) { return a > 0 && b > 0 ? (double)(b - a) / 1e6 : NAN; }

double cal_req_decode_ms(const cal_req_result *r)
{
    if (!r || r->first_token_ns <= 0 || r->last_token_ns <= r->first_token_ns) return NAN;
    return (double)(r->last_token_ns - r->first_token_ns) / 1e6;
}

double cal_decode_tok_s(int64_t first_ns, int64_t last_ns, long output_tokens)
{
    /* SPEC 1.4 client decode speed: the first token is prefill's, so the
     * span from it to the last carries output − 1 tokens */
    if (output_tokens < 2 || first_ns <= 0 || last_ns <= first_ns) return NAN;
    return (double)(output_tokens - 1) / ((double)(last_ns - first_ns) / 1e9);
}

double cal_req_value(const cal_req_result *r, cal_series s)
{
    if (!r) return NAN;
    int64_t base = cal_req_base_ns(r);
    switch (s) {
    case CAL_S_TTFT_MS:
        return r->first_token_ns > 0 ? span_ms(base, r->first_token_ns) : NAN;
    case CAL_S_E2E_MS:
        return r->end_ns > 0 ? span_ms(base, r->end_ns) : NAN;
    case CAL_S_TPOT_MS:
        /* (E2E − TTFT) ÷ (output − 1): the time after the first token per
         * token after it */
        if (r->output_tokens < 2 || base <= 0 || r->first_token_ns <= 0 ||
            r->end_ns <= r->first_token_ns)
            return NAN;
        return (double)(r->end_ns - r->first_token_ns) / 1e6 / (r->output_tokens - 1);
    case CAL_S_REQ_TOKS:
        /* SPEC 1.2: the request's own duration, from its send */
        if (r->output_tokens <= 0 || r->send_ns <= 0 || r->end_ns <= r->send_ns) return NAN;
        return r->output_tokens / ((double)(r->end_ns - r->send_ns) / 1e9);
    case CAL_S_PREFILL_TOKS: {
        double t = cal_req_value(r, CAL_S_TTFT_MS);
        return r->prompt_tokens > 0 && t > 0 ? r->prompt_tokens / (t / 1e3) : NAN;
    }
    case CAL_S_DECODE_TOKS:
        return cal_decode_tok_s(r->first_token_ns, r->last_token_ns, r->output_tokens);
    case CAL_S_SERVER_DECODE_TOKS:
        /* llama.cpp's predicted_n counts the first token, which prefill
         * produced, and predicted_ms does not cover it: its own
         * predicted_per_second is (n − 1) ÷ predicted_ms, as the client's
         * decode speed is (out − 1) ÷ (last − first) */
        if (!(r->server_decode_ms > 0) || r->server_decode_tokens < 2) return NAN;
        return (r->server_decode_tokens - 1) / (r->server_decode_ms / 1e3);
    case CAL_S_ITL_MS:
    case CAL_S_AGG_TOKS:
    default:
        return NAN;
    }
}

double cal_req_sample(const cal_req_result *r, cal_series s)
{
    return r && r->status == CAL_REQ_OK ? cal_req_value(r, s) : NAN;
}

size_t cal_itl_begin_any(cal_itl_iter *it, const cal_req_result *r)
{
    it->t = r ? r->chunk_ns : NULL;
    it->n = it->t ? r->n_chunks : 0;
    it->k = 1;
    return it->n > 1 ? (size_t)it->n - 1 : 0;
}

size_t cal_itl_begin(cal_itl_iter *it, const cal_req_result *r)
{
    size_t n = cal_itl_begin_any(it, r);
    if (r && r->status == CAL_REQ_OK) return n;
    it->n = 0;
    return 0;
}

int cal_itl_next(cal_itl_iter *it, double *gap_ms)
{
    if (it->k >= it->n) return 0;
    *gap_ms = (double)(it->t[it->k] - it->t[it->k - 1]) / 1e6;
    it->k++;
    return 1;
}

const cal_req_field cal_req_fields[] = {
    {"status", "", -1, "exactly one of ok, http_error, timeout, connect_error, stream_error, cancelled"},
    {"http_status", "", -1, "the HTTP status; null when none came"},
    {"error", "", -1, "the error body or message (capped); null when ok"},
    {"sched_offset_ms", "ms", -1, "scheduled send − the cell's start"},
    {"send_lag_ms", "ms", -1, "send − scheduled send: how late the client sent"},
    {"ttft_ms", "ms", CAL_S_TTFT_MS, "first content chunk − scheduled send"},
    {"e2el_ms", "ms", CAL_S_E2E_MS, "end − scheduled send"},
    {"last_token_ms", "ms", -1, "last content chunk − scheduled send"},
    {"prompt_tokens", "", -1, "from usage; null when unknown"},
    {"output_tokens", "", -1, "from usage, else counted content chunks; null when unknown"},
    {"token_source", "", -1, "usage or chunks"},
    {"n_chunks", "", -1, "content chunks received"},
    {"itl_ms", "ms", CAL_S_ITL_MS, "every gap between consecutive content chunks; absent when the chunk times were not kept"},
    {"tpot_ms", "ms", CAL_S_TPOT_MS, "(E2E − TTFT) ÷ (output − 1)"},
    {"request_tok_s", "tok/s", CAL_S_REQ_TOKS, "output tokens ÷ (end − send)"},
    {"prefill_tok_s", "tok/s", CAL_S_PREFILL_TOKS, "prompt tokens ÷ TTFT: a lower bound on prefill speed"},
    {"decode_tok_s", "tok/s", CAL_S_DECODE_TOKS, "(output − 1) ÷ (last − first content chunk)"},
    {"server_decode_ms", "ms", -1, "the server's own decode time (llama.cpp predicted_ms); null when none"},
    {"server_decode_tokens", "", -1, "the server's own count of generated tokens (llama.cpp predicted_n); null when none"},
    {"server_decode_tok_s", "tok/s", CAL_S_SERVER_DECODE_TOKS, "(server decode tokens − 1) ÷ server_decode_ms"},
    {"cached_tokens", "", -1, "prompt tokens the server took from its prefix cache (usage.prompt_tokens_details.cached_tokens, else llama.cpp timings.cache_n); null when it did not say"},
};
const size_t cal_req_n_fields = sizeof cal_req_fields / sizeof cal_req_fields[0];
