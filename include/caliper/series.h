/* caliper series — the one place each per-request series of the schema
 * (cal_series, schema.h) is computed from a request's timestamps. The cell
 * summary, the pooled analysis, the histograms, export, goodput, the chat
 * turns and the proxy all read a request's TTFT, E2E, TPOT, ITL gaps and
 * speeds through these calls, so no two of them can disagree on a formula.
 * docs/metrics.md gives the same formulas in prose.
 *
 * Nothing here allocates; r is never modified. NULL r reads as "unknown". */
#ifndef CALIPER_SERIES_H
#define CALIPER_SERIES_H
#include <stddef.h>
#include <stdint.h>
#include "caliper/probe.h"
#include "caliper/schema.h"

/* The instant a request's latencies count from, ns: its scheduled send
 * (sched_ns), else its send (send_ns) when it had no schedule; 0 unknown.
 * Counting from the schedule keeps client-side queueing in the figure. */
int64_t cal_req_base_ns(const cal_req_result *r);

/* The decode span, ms: last_token_ns − first_token_ns; NAN when either is
 * unknown or the span is not positive (everything came in one chunk). */
double cal_req_decode_ms(const cal_req_result *r);

/* The value of series s for request r, in the unit the series key names,
 * from whatever timestamps r holds, whatever its status (a failed request
 * that got a first token has a time to first token); NAN where an input is
 * missing or the formula is undefined:
 *   CAL_S_TTFT_MS      first_token − base
 *   CAL_S_E2E_MS       end − base
 *   CAL_S_TPOT_MS      (end − first_token) ÷ (output − 1), output ≥ 2
 *   CAL_S_REQ_TOKS     output ÷ (end − send), s
 *   CAL_S_PREFILL_TOKS prompt ÷ TTFT, s (a lower bound on prefill speed)
 *   CAL_S_DECODE_TOKS  (output − 1) ÷ (last − first token), s, output ≥ 2
 *   CAL_S_SERVER_DECODE_TOKS (server_decode_tokens − 1) ÷ server_decode_ms, s,
 *                      llama-server's predicted_per_second convention
 * CAL_S_ITL_MS has many values per request (cal_itl_begin) and
 * CAL_S_AGG_TOKS one per shot, not per request: both give NAN here. */
double cal_req_value(const cal_req_result *r, cal_series s);

/* The sample request r gives series s: cal_req_value when r ended ok, NAN
 * otherwise. Only ok requests enter a summary's statistics. */
double cal_req_sample(const cal_req_result *r, cal_series s);

/* The decode speed of a stream seen as first and last text times (ns) and
 * an output token count: (output − 1) ÷ (last − first), tok/s; NAN when
 * output < 2 or last <= first. What CAL_S_DECODE_TOKS computes, for a
 * caller that has no cal_req_result (the proxy). */
double cal_decode_tok_s(int64_t first_ns, int64_t last_ns, long output_tokens);

/* The ITL gaps of one request: chunk_ns[k] − chunk_ns[k − 1], ms, for
 * k = 1 … n_chunks − 1. cal_itl_begin returns how many gaps the iterator
 * will give: n_chunks − 1 when r ended ok and kept its chunk times, else 0
 * (a request whose times were dropped still has n_chunks, not the gaps).
 *   cal_itl_iter it; double g;
 *   cal_itl_begin(&it, r);
 *   while (cal_itl_next(&it, &g)) use(g);
 * cal_itl_begin_any is the same for a request of any status (export keeps
 * a failed request's chunk times too). */
typedef struct cal_itl_iter {
    const int64_t *t;   /* chunk times, ns */
    int n, k;           /* chunks, next index */
} cal_itl_iter;
size_t cal_itl_begin(cal_itl_iter *it, const cal_req_result *r);
size_t cal_itl_begin_any(cal_itl_iter *it, const cal_req_result *r);
int    cal_itl_next(cal_itl_iter *it, double *gap_ms);   /* 1: *gap_ms set; 0: done */

/* ---- the per-request fields of export ---------------------------------- */

/* Each request of `caliper export --json` is one object with these keys, in
 * this order: the recorded facts (series -1) and one value per per-request
 * series (through cal_req_value; itl_ms is the array of gaps). docs/schema.md
 * lists the same table. */
typedef struct cal_req_field {
    const char *key;    /* JSON key */
    const char *unit;   /* "ms", "tok/s", "" */
    int         series; /* cal_series, -1 for a recorded fact */
    const char *doc;    /* one line */
} cal_req_field;
extern const cal_req_field cal_req_fields[];
extern const size_t cal_req_n_fields;

#endif
